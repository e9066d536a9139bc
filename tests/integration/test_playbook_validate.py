# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml against the Kubernetes double: a healthy GPU Operator + MIG cluster validates
with zero failures and zero mutating requests, a cluster broken one way fails the run naming the check, its cause and
fix, the written snapshot validated offline gives the same results as the live run, nothing of a Secret is written,
and the shipped ClusterRole grants exactly the reads the role makes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

PLAYBOOK = str(REPO_ROOT / "playbooks" / "validate.yml")
PREFLIGHT_REPORT = "Preflight - report every problem of every host at once"
SECRET = "s3cr3t-token-value-do-not-print"
# the parts the ClusterPolicy CRD requires (tests/contract/crd_schemas)
POLICY_PARTS = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd", "nodeStatusExporter", "operator", "toolkit")
GPU_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
              "nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": "success",
              "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.deploy.driver": "true"}


def _daemonset(name, labels, image):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "gpu-operator", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"}, "containers": [{"name": name, "image": image}]}}}}


def _seed(k8s):
    for name in ("dgx-0", "dgx-1"):
        k8s.add_node(name, labels=GPU_LABELS, allocatable={"nvidia.com/mig-1g.5gb": "56"})
    k8s.add_node("cpu-0")
    k8s.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    k8s.put(_daemonset("nvidia-driver-daemonset", {"app": "nvidia-driver-daemonset"}, "nvcr.io/nvidia/driver:550.127.08"))
    k8s.put(_daemonset("nvidia-device-plugin-daemonset", {"app": "nvidia-device-plugin-daemonset"},
                       "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"))
    k8s.put({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
             "spec": dict({k: {} for k in POLICY_PARTS}, driver={"enabled": True}, mig={"strategy": "mixed"})})
    k8s.set_status("ClusterPolicy", "cluster-policy", {"state": "ready"})
    k8s.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default"},
             "spec": {"containers": [{"name": "t", "image": "pytorch", "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}},
                                      "env": [{"name": "HF_TOKEN", "value": SECRET}, {"name": "NCCL_DEBUG", "value": "INFO"}]}]}})


def _run(run_playbook, k8s, out, **extra):
    extra_vars = dict(validate_clusters="localhost", validate_hosts="no-such-group", validate_output_dir=str(out))
    extra_vars.update(extra)
    return run_playbook(PLAYBOOK, extra_vars=extra_vars, env=k8s.env())


def _statuses(path):
    return dict((t["name"], t["status"]) for t in json.loads(path.read_text())["results"]["tests"])


@pytest.fixture
def cluster(k8s_double):
    _seed(k8s_double)
    return k8s_double


def test_a_healthy_cluster_validates_read_only(run_playbook, cluster, tmp_path):
    before = len(cluster.requests())
    result = _run(run_playbook, cluster, tmp_path / "out").assert_ok()
    assert [r for r in cluster.requests()[before:] if r.mutating] == []
    # API discovery (granted to every authenticated user by system:discovery) and one list call per kind read
    assert {r.verb for r in cluster.requests()[before:]} <= {"list", "discovery"}
    assert sorted(r.kind for r in cluster.requests()[before:] if r.verb == "list") == [
        "ClusterPolicy", "DaemonSet", "GKENetworkParamSet", "Network", "NicClusterPolicy", "Node", "Pod"]
    folder = tmp_path / "out" / "localhost"
    statuses = _statuses(folder / "ctrf.json")
    for check in ("gpu.device_plugin", "gpu.allocatable", "gpu_operator.cluster_policy", "gpu_operator.driver_pods",
                  "mig.capable_gpus", "mig.config_state", "mig.geometry", "gpu.requests_advertised"):
        assert statuses[check] == "passed", (check, statuses)
    assert "failed" not in statuses.values() and "other" not in statuses.values()
    assert ET.parse(str(folder / "junit.xml")).getroot().get("failures") == "0"
    assert "## deployment" in (folder / "report.md").read_text()
    counts = result.task("Validation counts of every target")
    assert "0 failed" in json.dumps(counts) and "0 other" in json.dumps(counts)
    for written in folder.iterdir():
        assert SECRET not in written.read_text(), written
    assert SECRET not in result.output


def test_a_broken_cluster_fails_the_run_with_the_cause_and_fix(run_playbook, cluster, tmp_path):
    cluster.modify("Node", "dgx-1", lambda n: n["metadata"]["labels"].update({"nvidia.com/mig.config.state": "failed"}))
    before = len(cluster.requests())
    result = _run(run_playbook, cluster, tmp_path / "out").assert_failed()
    assert [r for r in cluster.requests()[before:] if r.mutating] == []
    statuses = _statuses(tmp_path / "out" / "localhost" / "ctrf.json")
    assert statuses["mig.config_state"] == "failed"
    assert [k for k, v in statuses.items() if v == "failed"] == ["mig.config_state"]
    page = (tmp_path / "out" / "localhost" / "report.md").read_text()
    assert "| FAILED | `mig.config_state` |" in page and "role gpu_ops.cluster.mig_manager, variable mig_manager_config" in page
    assert "1 failed" in result.output


def test_the_snapshot_validates_offline_with_the_same_results(run_playbook, cluster, tmp_path):
    _run(run_playbook, cluster, tmp_path / "live").assert_ok()
    snapshot = tmp_path / "live" / "localhost" / "snapshot.json"
    requests = len(cluster.requests())
    _run(run_playbook, cluster, tmp_path / "offline", validate_snapshot=str(snapshot)).assert_ok()
    assert len(cluster.requests()) == requests, "offline validation contacts nothing"
    assert _statuses(tmp_path / "offline" / "localhost" / "ctrf.json") == _statuses(tmp_path / "live" / "localhost" / "ctrf.json")
    assert not (tmp_path / "offline" / "localhost" / "snapshot.json").exists()


def test_an_unreachable_cluster_is_other_and_fails(run_playbook, cluster, tmp_path):
    # a kubeconfig that points at a closed port: the double's, kept after it stopped
    env = dict(cluster.env(), K8S_AUTH_KUBECONFIG=cluster.write_kubeconfig(str(tmp_path / "kubeconfig")))
    cluster.stop()
    result = run_playbook(PLAYBOOK, extra_vars=dict(validate_clusters="localhost", validate_hosts="none",
                                                    validate_output_dir=str(tmp_path / "out")), env=env).assert_failed()
    statuses = _statuses(tmp_path / "out" / "localhost" / "ctrf.json")
    assert "passed" not in statuses.values()
    assert "other" in statuses.values()
    assert "other - NOT OK" in result.output
    # the connection error is in the report, not "no resources returned" (ansible-core 2.19 drops the message of a
    # failure that failed_when turns off)
    tests = dict((t["name"], t) for t in json.loads((tmp_path / "out" / "localhost" / "ctrf.json").read_text())["results"]["tests"])
    message = tests["gpu_operator.cluster_policy"]["message"]
    assert "cannot read kubernetes.cluster_policies (" in message and "Connection refused" in message, message
    assert "no resources returned" not in json.dumps(tests)
    assert "Fix: make the read work (the kubeconfig's API server reachable" in message
    assert cluster.token not in result.output


def test_the_clusterrole_grants_exactly_the_reads_of_the_role():
    role = yaml.safe_load((REPO_ROOT / "roles" / "validate" / "files" / "clusterrole.yaml").read_text())
    granted = set()
    for rule in role["rules"]:
        assert rule["verbs"] == ["list"]
        granted |= set((group, resource) for group in rule["apiGroups"] for resource in rule["resources"])
    reads = yaml.safe_load((REPO_ROOT / "roles" / "validate" / "vars" / "main.yml").read_text())["__validate_k8s_reads"]
    plural = {"Node": "nodes", "DaemonSet": "daemonsets", "Pod": "pods", "ClusterPolicy": "clusterpolicies",
              "NicClusterPolicy": "nicclusterpolicies", "GKENetworkParamSet": "gkenetworkparamsets", "Network": "networks"}
    wanted = set((r["api_version"].split("/")[0] if "/" in r["api_version"] else "", plural[r["kind"]]) for r in reads)
    assert granted == wanted
    assert not any("secrets" in rule["resources"] or "configmaps" in rule["resources"] for rule in role["rules"])


def test_the_sample_snapshot_validates_offline_and_fails_on_its_breaks(run_playbook, tmp_path):
    sample = REPO_ROOT / "tests" / "samples" / "validate" / "snapshot-a3mega.json"
    result = run_playbook(PLAYBOOK, extra_vars=dict(validate_snapshot=str(sample), validate_output_dir=str(tmp_path)))
    result.assert_failed()
    statuses = _statuses(tmp_path / "a3mega-us-central1" / "ctrf.json")
    assert sorted(k for k, v in statuses.items() if v == "failed") == ["gke.gpu_vpc", "gpudirect.fast_socket", "gpudirect.pod_whole_node"]
    assert "a3mega-us-central1: 45 checks: 21 passed, 3 failed, 21 skipped, 0 other - NOT OK" in result.output
    page = (tmp_path / "a3mega-us-central1" / "report.md").read_text()
    assert page == (REPO_ROOT / "docs" / "validate-sample-report.md").read_text().split("-->\n\n", 1)[1]


def test_a_gpu_host_validates_over_its_facts(run_playbook, tmp_path):
    """The host play: gpu_host_facts against the strict fake nvidia-smi (two A100s, no RDMA on this machine)."""
    from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake
    state = tmp_path / "nvidia-smi.json"
    state.write_text(json.dumps(fake.preset_state("A100-40GB x2")), encoding="utf-8")
    env = {"FAKE_NVIDIA_SMI_STATE": str(state), "FAKE_NVIDIA_SMI_LOG": str(tmp_path / "nvidia-smi.log")}
    result = run_playbook(PLAYBOOK, extra_vars=dict(validate_clusters="none", validate_hosts="localhost", validate_become=False,
                                                    validate_nvidia_smi=str(REPO_ROOT / "tests" / "fakes" / "nvidia-smi"),
                                                    validate_output_dir=str(tmp_path / "out"), awx_job_id=77), env=env)
    statuses = _statuses(tmp_path / "out" / "localhost" / "ctrf.json")
    # in AWX (awx_job_id set) the counts are also published under the job's own key, for the merge after a sliced job
    published = result.task("gpu_ops.cluster.validate : Publish the counts (AWX) of localhost")["result"]["ansible_stats"]["data"]
    assert published["validate_slice_77"] == published["validate"] and set(published["validate"]) == {"localhost"}
    assert statuses["host.driver"] == "passed"
    assert statuses["gpudirect.installer"] == "skipped"
    writes = [json.loads(line) for line in (tmp_path / "nvidia-smi.log").read_text().splitlines() if json.loads(line)["write"]]
    assert writes == [], "validation changes nothing on the host"
    # this machine has no NVIDIA GPU on its PCI bus: host.gpus_visible skips, it does not pass
    assert statuses["host.gpus_visible"] in ("skipped", "failed")
    ok = not any(v in ("failed", "other") for v in statuses.values())
    assert (result.rc == 0) == ok, statuses


def test_a_gke_cluster_is_read_through_the_info_modules(run_playbook, k8s_double, gcp_double, gcp_defaults, tmp_path):
    """validate_gke: gke_multinetwork_info and gpu_nodepool_info against the GCP double, read-only on both APIs."""
    from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT
    store = gcp_double._project(GCP_PROJECT)
    store["clusters"]["us-central1/a3mega"] = {
        "name": "a3mega", "status": "RUNNING", "currentMasterVersion": "1.32.2-gke.1489001", "autopilot": {"enabled": False},
        "networkConfig": {"enableMultiNetworking": True, "datapathProvider": "ADVANCED_DATAPATH"}}
    store["nodePools"]["us-central1/a3mega/a3mega-pool"] = {
        "name": "a3mega-pool", "status": "RUNNING", "version": "1.32.2-gke.1489001",
        "config": {"machineType": "a3-megagpu-8g", "imageType": "UBUNTU_CONTAINERD",
                   "accelerators": [{"acceleratorType": "nvidia-h100-mega-80gb", "acceleratorCount": "8"}]}}
    labels = {"node.kubernetes.io/instance-type": "a3-megagpu-8g", "cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"}
    for name in ("gke-a3mega-0", "gke-a3mega-1"):
        k8s_double.add_node(name, labels=labels, allocatable={"nvidia.com/gpu": "8"})
        k8s_double.modify("Node", name, lambda n: n["status"].update(nodeInfo={"kubeletVersion": "v1.32.2-gke.1489001"}))
    play = [{"name": "validate", "hosts": "localhost", "gather_facts": False, "module_defaults": gcp_defaults, "tasks": [
        {"name": "Validate", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.validate"},
         "vars": {"validate_gke": {"cluster": "a3mega", "location": "us-central1", "gpudirect": "tcpxo"},
                  "validate_output_dir": str(tmp_path / "out"), "validate_fail": False}}]}]
    before = len(k8s_double.requests())
    run_playbook(play, env=k8s_double.env()).assert_ok()
    assert gcp_double.mutating_requests() == []
    assert [r for r in k8s_double.requests()[before:] if r.mutating] == []
    document = json.loads((tmp_path / "out" / "localhost" / "ctrf.json").read_text())
    tests = dict((t["name"], t) for t in document["results"]["tests"])
    for check in ("gke.dataplane_v2", "gke.multi_networking", "gke.standard_cluster", "gke.gpudirect.version_gate"):
        assert tests[check]["status"] == "passed", tests[check]
    assert tests["gke.cos_image"]["status"] == "failed"
    assert "pool a3mega-pool runs UBUNTU_CONTAINERD" in tests["gke.cos_image"]["message"]
    assert tests["gke.gpu_vpc"]["status"] == "failed"          # the fabric's networks do not exist in the double
    assert "network missing" in tests["gke.gpu_vpc"]["message"]
    assert tests["gpudirect.installer"]["status"] == "failed"  # nothing installed


def test_a_gke_rdma_cluster_is_read_with_its_network_objects(run_playbook, k8s_double, gcp_double, gcp_defaults, tmp_path):
    """GPUDirect-RDMA (A4X, regional cluster, zone of the RoCE VPC): the pool's boot disk and the GKENetworkParamSet /
    Network objects reach the checks through the role's reads; the pair whose subnet is taken is not Ready and fails
    gpudirect.rdma_networks alone, naming it and its reason."""
    from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT
    store = gcp_double._project(GCP_PROJECT)
    store["clusters"]["us-central1/a4x"] = {
        "name": "a4x", "status": "RUNNING", "currentMasterVersion": "1.34.1-gke.1829001", "autopilot": {"enabled": False},
        "networkConfig": {"enableMultiNetworking": True, "datapathProvider": "ADVANCED_DATAPATH"}}
    store["nodePools"]["us-central1/a4x/a4x-pool"] = {
        "name": "a4x-pool", "status": "RUNNING", "version": "1.34.1-gke.1829001",
        "config": {"machineType": "a4x-highgpu-4g", "imageType": "COS_CONTAINERD", "diskType": "pd-balanced",
                   "accelerators": [{"acceleratorType": "nvidia-gb200", "acceleratorCount": "4"}]}}
    labels = {"node.kubernetes.io/instance-type": "a4x-highgpu-4g", "cloud.google.com/gke-accelerator": "nvidia-gb200",
              "kubernetes.io/arch": "arm64"}
    for name in ("gke-a4x-0", "gke-a4x-1"):
        k8s_double.add_node(name, labels=labels, allocatable={"nvidia.com/gpu": "4"})
        k8s_double.modify("Node", name, lambda n: n["status"].update(nodeInfo={"kubeletVersion": "v1.34.1-gke.1829001"}))
    # one subnet per network, but rdma-2 names rdma-1's: GKE refuses it (DeviceModeSubnetAlreadyInUse)
    for name, mode in [("gvnic-1", "NetDevice")] + [("rdma-%d" % i, "RDMA") for i in range(4)]:
        subnet = "s-rdma-1" if name == "rdma-2" else "s-" + name
        k8s_double.put({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": name},
                        "spec": {"vpc": "v-gvnic" if mode == "NetDevice" else "v-roce", "vpcSubnet": subnet, "deviceMode": mode}})
        k8s_double.put({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": name},
                        "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                                     "name": name}}})
    play = [{"name": "validate", "hosts": "localhost", "gather_facts": False, "module_defaults": gcp_defaults, "tasks": [
        {"name": "Validate", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.validate"},
         "vars": {"validate_gke": {"cluster": "a4x", "location": "us-central1", "gpudirect": "rdma-a4x", "zone": "us-central1-b"},
                  "validate_output_dir": str(tmp_path / "out"), "validate_fail": False}}]}]
    run_playbook(play, env=k8s_double.env()).assert_ok()
    assert gcp_double.mutating_requests() == []
    tests = dict((t["name"], t) for t in json.loads((tmp_path / "out" / "localhost" / "ctrf.json").read_text())["results"]["tests"])
    for check in ("gke.dataplane_v2", "gke.multi_networking", "gke.gpudirect.version_gate",
                  "gpudirect.allocatable_gpus", "gke.cos_image"):
        assert tests[check]["status"] == "passed", tests[check]
    assert tests["gpudirect.rdma_networks"]["status"] == "failed"
    assert tests["gpudirect.rdma_networks"]["extra"]["evidence"][0] == (
        "rdma-a4x: GKENetworkParamSet gvnic-1 deviceMode NetDevice, Network present")
    message = tests["gpudirect.rdma_networks"]["message"]
    assert (" GKENetworkParamSet rdma-2 is not Ready (Ready False: DeviceModeSubnetAlreadyInUse: subnet s-rdma-1 is already used "
            "by rdma-1) Fix: ") in message, message
    assert message.endswith("Fix: " + tests["gpudirect.rdma_networks"]["extra"]["fix"]) and "gke_gpu_cluster_gpudirect" in message
    assert tests["gke.gpudirect.boot_disk"]["status"] == "failed"
    assert "pool a4x-pool (a4x-highgpu-4g) boots from pd-balanced" in tests["gke.gpudirect.boot_disk"]["message"]
    assert tests["gpudirect.nri_injector"]["status"] == "skipped"
    assert tests["gpudirect.installer"]["status"] == "failed"  # nothing installed


def test_a_custom_mig_config_is_judged_by_the_mig_parted_configmap_given(run_playbook, cluster, tmp_path):
    """validate_mig_parted_config: the MIG manager's ConfigMap (as kubectl shows it) defines a custom geometry; the role
    reads no ConfigMap itself (the ClusterRole grants none). dgx-0 advertises the geometry, dgx-1 does not."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom-mig-config", "namespace": "gpu-operator"},
                  "data": {"config.yaml": "version: v1\nmig-configs:\n  three-sizes:\n    - devices: all\n      mig-enabled: true\n"
                                          "      mig-devices: {3g.20gb: 1, 2g.10gb: 1, 1g.5gb: 1}\n"}}
    for name, three_g in (("dgx-0", "8"), ("dgx-1", "4")):
        cluster.modify("Node", name, lambda n, three_g=three_g: (
            n["metadata"]["labels"].update({"nvidia.com/mig.config": "three-sizes"}),
            n["status"]["allocatable"].pop("nvidia.com/mig-1g.5gb"),
            n["status"]["allocatable"].update({"nvidia.com/mig-3g.20gb": three_g, "nvidia.com/mig-2g.10gb": "8",
                                               "nvidia.com/mig-1g.5gb": "8"})))
    result = _run(run_playbook, cluster, tmp_path / "out", validate_mig_parted_config=config_map).assert_failed()
    tests = dict((t["name"], t) for t in json.loads((tmp_path / "out" / "localhost" / "ctrf.json").read_text())["results"]["tests"])
    assert [k for k, t in tests.items() if t["status"] in ("failed", "other")] == ["mig.geometry"]
    assert "node dgx-1: allocatable" in tests["mig.geometry"]["message"] and "dgx-0" not in tests["mig.geometry"]["message"]
    assert "custom config three-sizes of ConfigMap gpu-operator/custom-mig-config" in " ".join(tests["mig.geometry"]["extra"]["evidence"])
    snapshot = json.loads((tmp_path / "out" / "localhost" / "snapshot.json").read_text())
    assert snapshot["mig_parted"]["source"] == "ConfigMap gpu-operator/custom-mig-config"
    assert not [r for r in cluster.requests() if r.kind == "ConfigMap"], "the role reads no ConfigMap"
    assert "1 failed" in result.output


def _sample(**changes):
    document = json.loads((REPO_ROOT / "tests" / "samples" / "validate" / "snapshot-a3mega.json").read_text())
    document.update(changes)
    return document


def _files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", ["../escaped", "../../escaped", "reports/../../escaped", "/tmp/escaped-validate", ".."])
def test_a_snapshot_target_name_that_leaves_the_output_folder_is_refused_before_anything_is_written(run_playbook, tmp_path, name):
    work = tmp_path / "work"
    work.mkdir()
    sent = work / "sent.json"
    sent.write_text(json.dumps(_sample(target={"name": name, "kind": "kubernetes"})), encoding="utf-8")
    result = run_playbook(PLAYBOOK, extra_vars=dict(validate_snapshot=str(sent), validate_output_dir=str(work / "out" / "reports")))
    result.assert_failed()
    [failed] = result.failed
    message = failed["result"]["msg"]
    assert message.startswith("validate: target.name of the snapshot file %s: " % sent), message
    assert "validate_output_dir" in message and ("path separator" in message or "would leave its folder" in message)
    # nothing beside the snapshot file, nothing beside the run's own folder (run-01: its inventory, config, results)
    assert _files_under(work) == ["sent.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-01", "work"]
    assert not list(tmp_path.rglob("escaped*"))


def test_an_inventory_host_name_that_leaves_the_output_folder_is_refused_before_the_cluster_is_read(run_playbook, cluster, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"../../escaped": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}), encoding="utf-8")
    before = len(cluster.requests())
    result = run_playbook(PLAYBOOK, extra_vars=dict(validate_clusters="all:!localhost", validate_hosts="no-such-group",
                                                    validate_output_dir=str(tmp_path / "out" / "reports")),
                          env=cluster.env(), extra_args=["-i", str(inventory)])
    result.assert_failed()
    [failed] = result.failed
    # the playbook's preflight finds it, before the first read of any target
    assert failed["task"].endswith(PREFLIGHT_REPORT)
    assert failed["result"]["msg"].splitlines()[1].startswith(
        "[../../escaped] validate: validate_name (default: the inventory host name): '../../escaped' holds a path separator"
    ), failed["result"]["msg"]
    assert cluster.requests()[before:] == [], "nothing is read before the names are checked"
    assert not (tmp_path / "out").exists() and not (tmp_path / "escaped").exists()


def test_every_report_parses_when_the_snapshot_holds_control_characters(run_playbook, tmp_path):
    document = _sample()
    for pod in document["kubernetes"]["pods"]:
        pod["metadata"]["name"] += "\x00\x08\x1b[2J\x7f"
    sent = tmp_path / "sent.json"
    sent.write_text(json.dumps(document), encoding="utf-8")
    run_playbook(PLAYBOOK, extra_vars=dict(validate_snapshot=str(sent), validate_output_dir=str(tmp_path / "out"))).assert_failed()
    folder = tmp_path / "out" / "a3mega-us-central1"
    root = ET.parse(str(folder / "junit.xml")).getroot()
    [failure] = [f for f in root.iter("failure") if "pod_whole_node" in f.get("message") or "nccl-test-0" in f.get("message")]
    assert "pod default/nccl-test-0\\x00\\x08\\x1b[2J\\x7f requests 4 GPU(s)" in failure.get("message")
    tests = dict((t["name"], t) for t in json.loads((folder / "ctrf.json").read_text())["results"]["tests"])
    assert "nccl-test-0\\x00\\x08\\x1b[2J\\x7f" in tests["gpudirect.pod_whole_node"]["message"]
    page = (folder / "report.md").read_text()
    assert "nccl-test-0\\x00\\x08\\x1b[2J\\x7f requests" in page
    for name in ("junit.xml", "ctrf.json", "report.md"):
        text = (folder / name).read_text()
        assert not [c for c in "\x00\x08\x1b\x7f" if c in text], name


# ------------------------------------------------------------------------------------------------ the preflight

def test_a_misspelt_option_warns_in_the_preflight_and_the_run_goes_on(run_playbook, cluster, tmp_path):
    """validate_phase (for validate_phases) is ignored by Ansible: the preflight names the option it most likely means."""
    result = _run(run_playbook, cluster, tmp_path / "out", validate_phase=["performance"]).assert_ok()
    assert result.task(PREFLIGHT_REPORT)["result"]["msg"].splitlines() == [
        "Warning: 1 variable(s) with the prefix of a role that no role of playbooks/validate.yml declares; Ansible ignores"
        " them (gpu_ops_preflight_strict=true makes them problems of the preflight):",
        "[localhost] validate_phase is not an option of any role this playbook runs; did you mean validate_phases?"]
    assert (tmp_path / "out" / "localhost" / "ctrf.json").is_file()


def test_strict_fails_on_a_misspelt_option_before_anything_is_read_or_written(run_playbook, cluster, tmp_path):
    before = len(cluster.requests())
    result = _run(run_playbook, cluster, tmp_path / "out", validate_phase=["performance"], gpu_ops_preflight_strict=True)
    result.assert_failed()
    [failed] = result.failed
    assert failed["task"].endswith(PREFLIGHT_REPORT)
    assert failed["result"]["msg"].splitlines() == [
        "Preflight of playbooks/validate.yml found 1 problem(s); nothing was changed. Fix them all, then run again:",
        "[localhost] validate.yml: validate_phase is not an option of any role this playbook runs; did you mean validate_phases?"]
    assert cluster.requests()[before:] == []
    assert not (tmp_path / "out").exists()


def test_every_bad_option_of_every_target_in_one_report_before_any_read(run_playbook, cluster, tmp_path):
    """Phases and check ids the suite would refuse only after the reads and the probes, a check of a phase that does not
    run, the probes' settings: one report, nothing read, no probe, no report file."""
    before = len(cluster.requests())
    result = _run(run_playbook, cluster, tmp_path / "out", validate_phases=["deployment", "preformance"],
                  validate_checks=["mig.geometry", "gpu.no_such_check", "perf.nccl_avg_busbw"],
                  validate_performance_tolerance=1.5, validate_performance_namespace="Probes",
                  validate_performance_nccl_benchmarks=["allreduce"])
    result.assert_failed()
    [failed] = result.failed
    assert failed["task"].endswith(PREFLIGHT_REPORT)
    lines = failed["result"]["msg"].splitlines()
    assert lines[0] == "Preflight of playbooks/validate.yml found 1 problem(s); nothing was changed. Fix them all, then run again:"
    assert "validate_performance_nccl_benchmarks" in lines[1] and "all_gather, all_reduce" in lines[1], lines
    assert cluster.requests()[before:] == []
    assert not (tmp_path / "out").exists()
    # the spec passed: the values
    result = _run(run_playbook, cluster, tmp_path / "out", validate_phases=["deployment", "preformance"],
                  validate_checks=["mig.geometry", "gpu.no_such_check", "perf.nccl_avg_busbw"],
                  validate_performance_tolerance=1.5, validate_performance_namespace="Probes")
    [failed] = result.assert_failed().failed
    lines = failed["result"]["msg"].splitlines()
    assert lines[0] == "Preflight of playbooks/validate.yml found 5 problem(s); nothing was changed. Fix them all, then run again:"
    assert lines[1:] == [
        "[localhost] validate: validate_performance_namespace: 'Probes' is not a DNS-1123 label" + lines[1].split("DNS-1123 label", 1)[1],
        "[localhost] validate: validate_performance_tolerance: 1.5 is outside [0, 1): a fraction of 0 or more and less than 1"
        " (0.1 is 10 percent)",
        "[localhost] validate: validate_phases[1]: 'preformance' is not a phase; choose from "
        + lines[3].split("choose from ", 1)[1],
        "[localhost] validate: validate_checks[1]: 'gpu.no_such_check' is not a check id (docs/validate-checks.md lists them; "
        "of its group: " + lines[4].split("of its group: ", 1)[1],
        "[localhost] validate: validate_checks[2]: perf.nccl_avg_busbw is a check of the performance phase, which"
        " validate_phases (deployment, preformance) does not list: it would not run"], lines
    assert "preflight, deployment, conformance, health, performance" in lines[3]
    assert "gpu.allocatable" in lines[4]
    assert cluster.requests()[before:] == []
    assert not (tmp_path / "out").exists()
