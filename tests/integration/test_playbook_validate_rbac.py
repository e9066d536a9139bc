# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml with exactly the rights of the shipped ClusterRole ("ship the minimal ClusterRole
it needs ... and test that it runs with exactly those rights; nothing it captures or prints holds Secret data").

The Kubernetes double enforces RBAC for a token grant()ed a ClusterRole's rules (403 Forbidden for anything else).
One run of the playbook validates several inventory hosts, each reading a cluster with its own kubeconfig: one with
the shipped ClusterRole, and one per grant of it taken away. With all of it, the healthy cluster passes every
non-performance phase with no 403; without any one grant, the checks that need the read it allows end as ``other``
(never passed) and nothing else changes, so every grant is needed."""

from __future__ import annotations

import base64
import copy
import json
import sys

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT
from ansible_collections.gpu_ops.cluster.tests.integration.test_playbook_validate import PLAYBOOK, _seed

CLUSTERROLE = REPO_ROOT / "roles" / "validate" / "files" / "clusterrole.yaml"
USER = "system:serviceaccount:gpu-ops:%s"        # one identity per host, so the request log tells them apart
SECRET_VALUE = "hf_s3cr3t-from-a-Secret-0123456789"
# the snapshot key of each resource the role lists (roles/validate/vars/main.yml __validate_k8s_reads)
KEYS = {"nodes": "nodes", "pods": "pods", "daemonsets": "daemonsets", "clusterpolicies": "cluster_policies",
        "nicclusterpolicies": "nic_cluster_policies", "gkenetworkparamsets": "network_param_sets", "networks": "networks"}
KINDS = {"nodes": "Node", "pods": "Pod", "daemonsets": "DaemonSet", "clusterpolicies": "ClusterPolicy",
         "nicclusterpolicies": "NicClusterPolicy", "gkenetworkparamsets": "GKENetworkParamSet", "networks": "Network"}
GROUPS = {"daemonsets": "apps", "clusterpolicies": "nvidia.com", "nicclusterpolicies": "mellanox.com",
          "gkenetworkparamsets": "networking.gke.io", "networks": "networking.gke.io"}
# a GKE A3 Ultra node: the GPUDirect checks, the only ones that read DaemonSets and the GKE network objects, apply to it
A3ULTRA = {"node.kubernetes.io/instance-type": "a3-ultragpu-8g", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
GPUDIRECT_READS = ("daemonsets", "gkenetworkparamsets", "networks")


def _clusterrole():
    return yaml.safe_load(CLUSTERROLE.read_text(encoding="utf-8"))


def _without(role, index, resource):
    """The ClusterRole with ``resource`` taken out of its rule ``index`` (the rule goes when it had nothing else)."""
    reduced = copy.deepcopy(role)
    rule = reduced["rules"][index]
    rule["resources"] = [r for r in rule["resources"] if r != resource]
    if not rule["resources"]:
        del reduced["rules"][index]
    return reduced


def _variants(role):
    """(name, resource taken away or None, ClusterRole) of the shipped role and of each grant taken out of it."""
    found = [("full", None, role)]
    for index, rule in enumerate(role["rules"]):
        for resource in rule["resources"]:
            found.append(("minus-%s" % resource, resource, _without(role, index, resource)))
    return found


def _seed_secret(k8s):
    """A Secret, and the trainer pod of the healthy cluster reading it as an env var and a volume."""
    k8s.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": "default"}, "type": "Opaque",
             "data": {"token": base64.b64encode(SECRET_VALUE.encode()).decode()}})

    def use(pod):
        container = pod["spec"]["containers"][0]
        container["env"].append({"name": "HF_HUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}})
        container["volumeMounts"] = [{"name": "hf", "mountPath": "/var/run/hf"}]
        pod["spec"]["volumes"] = [{"name": "hf", "secret": {"secretName": "hf"}}]
    k8s.modify("Pod", "trainer", use, "default")


@pytest.fixture(scope="module")
def rbac_run(run_playbook_module, tmp_path_factory):
    """One validate.yml run: a host per (cluster, ClusterRole variant), each with its own kubeconfig."""
    role = _clusterrole()
    out = tmp_path_factory.mktemp("rbac-out")
    configs = tmp_path_factory.mktemp("rbac-kubeconfigs")
    with K8sDouble() as mig, K8sDouble() as gpudirect:
        _seed(mig)
        _seed_secret(mig)
        # a GPUDirect cluster with nothing installed: the installer checks read its DaemonSets (and fail)
        gpudirect.add_node("gke-a3ultra-0", labels=A3ULTRA, allocatable={"nvidia.com/gpu": "8"})
        gpudirect.modify("Node", "gke-a3ultra-0", lambda n: n["status"].update(nodeInfo={"kubeletVersion": "v1.32.2-gke.1489001"}))
        hosts = {}
        for cluster_name, double in (("mig", mig), ("gpudirect", gpudirect)):
            for name, resource, variant in _variants(role):
                host = "%s-%s" % (cluster_name, name)
                token = double.grant(variant, user=USER % host)
                hosts[host] = dict(resource=resource, cluster=cluster_name, role=variant,
                                   kubeconfig=double.write_kubeconfig(str(configs / host), token=token))
        inventory = configs / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"rbac": {"hosts": dict(
            (host, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                    "gpu_ops_kubeconfig": item["kubeconfig"]}) for host, item in hosts.items())}}), encoding="utf-8")
        for double in (mig, gpudirect):
            double.clear_requests()
        result = run_playbook_module(PLAYBOOK, extra_vars=dict(validate_clusters="rbac", validate_hosts="no-such-group",
                                                               validate_output_dir=str(out)),
                                     env={"ANSIBLE_FORKS": "12"}, extra_args=["-i", str(inventory)])
        requests = dict(mig=mig.requests(), gpudirect=gpudirect.requests())
    return dict(result=result, out=out, hosts=hosts, requests=requests)


def _tests(rbac_run, host):
    return dict((t["name"], t) for t in json.loads((rbac_run["out"] / host / "ctrf.json").read_text())["results"]["tests"])


def _requests_of(rbac_run, host):
    return [r for r in rbac_run["requests"][rbac_run["hosts"][host]["cluster"]] if r.user == USER % host]


def test_the_shipped_clusterrole_is_enough_and_its_reads_are_all_allowed(rbac_run):
    assert all(r.user for cluster in rbac_run["requests"].values() for r in cluster), "every request is a granted identity's"
    # every grant of the shipped ClusterRole is taken away once below (a new grant needs a case there)
    assert sorted(item["resource"] for host, item in rbac_run["hosts"].items() if host.startswith("mig-minus-")) == sorted(KEYS)
    tests = _tests(rbac_run, "mig-full")
    statuses = dict((k, t["status"]) for k, t in tests.items())
    assert set(statuses.values()) <= {"passed", "skipped"}, statuses
    for check in ("gpu.device_plugin", "gpu.allocatable", "gpu_operator.cluster_policy", "gpu_operator.driver_pods",
                  "mig.capable_gpus", "mig.config_state", "mig.geometry", "gpu.requests_advertised"):
        assert statuses[check] == "passed", (check, tests[check])
    assert {t["tags"][0] for t in tests.values()} == {"preflight", "deployment", "conformance"}
    snapshot = json.loads((rbac_run["out"] / "mig-full" / "snapshot.json").read_text())
    assert not any(k.startswith("kubernetes.") for k in (snapshot.get("read_errors") or {})), snapshot.get("read_errors")
    # the GPUDirect-RDMA cluster: its installer and network checks read the DaemonSets and the GKE network objects and
    # judge them (nothing is installed there)
    gpudirect = _tests(rbac_run, "gpudirect-full")
    assert gpudirect["gpudirect.installer"]["status"] == "failed"
    assert "not found" in gpudirect["gpudirect.installer"]["message"]
    assert gpudirect["gpudirect.rdma_networks"]["status"] == "failed"
    for host in ("mig-full", "gpudirect-full"):
        requests = _requests_of(rbac_run, host)
        assert [r for r in requests if r.status == 403] == []
        # discovery may come from kubernetes.core's discovery cache of an earlier run: only lists are certain
        assert {r.verb for r in requests} <= {"list", "discovery"}
        assert sorted(r.kind for r in requests if r.verb == "list") == sorted(KINDS.values())


@pytest.mark.parametrize("resource", sorted(KEYS))
def test_without_any_one_grant_the_checks_that_need_it_are_other_never_passed(rbac_run, resource):
    key = "kubernetes." + KEYS[resource]
    # the cluster where a check reads this resource (only the GPUDirect checks read DaemonSets and network objects)
    cluster = "gpudirect" if resource in GPUDIRECT_READS else "mig"
    host = "%s-minus-%s" % (cluster, resource)
    full = _tests(rbac_run, "%s-full" % cluster)
    reduced = _tests(rbac_run, host)
    assert sorted(full) == sorted(reduced)
    changed = sorted(k for k in full if full[k]["status"] != reduced[k]["status"])
    assert changed, "taking %s away changes no check: the ClusterRole would not need it" % resource
    for check in changed:
        assert reduced[check]["status"] == "other", (check, reduced[check])
        assert key in reduced[check]["extra"]["reads"], (check, "ended other without reading %s" % key)
        # the check says what it could not read and why, in the API server's words
        assert "cannot read %s (403 Forbidden: " % key in reduced[check]["message"], reduced[check]["message"]
        assert 'cannot list resource "%s"' % resource in reduced[check]["message"]
    snapshot = json.loads((rbac_run["out"] / host / "snapshot.json").read_text())
    assert sorted(k for k in snapshot["read_errors"] if k.startswith("kubernetes.")) == [key]
    group = GROUPS.get(resource)
    assert snapshot["read_errors"][key].startswith('403 Forbidden: %s%s is forbidden: User "%s" cannot list resource' % (
        resource, "." + group if group else "", USER % host))
    # the API server refused exactly that list
    assert [(r.verb, r.kind) for r in _requests_of(rbac_run, host) if r.status == 403] == [("list", KINDS[resource])]


def test_no_secret_is_read_and_nothing_written_or_printed_holds_secret_data(rbac_run):
    requests = [r for cluster in rbac_run["requests"].values() for r in cluster]
    assert not [r for r in requests if r.kind == "Secret" or "/secrets" in r.path]
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    for host in rbac_run["hosts"]:
        for written in (rbac_run["out"] / host).iterdir():
            text = written.read_text()
            assert SECRET_VALUE not in text and encoded not in text, written
    for text in (rbac_run["result"].output, json.dumps(rbac_run["result"].__dict__, default=str)):
        assert SECRET_VALUE not in text and encoded not in text
    # the pod that reads the Secret is in the snapshot by name only: the env var's name, the volume's kind
    snapshot = json.loads((rbac_run["out"] / "mig-full" / "snapshot.json").read_text())
    trainer = [p for p in snapshot["kubernetes"]["pods"] if p["metadata"]["name"] == "trainer"][0]
    assert {"name": "HF_HUB_TOKEN"} in trainer["spec"]["containers"][0]["env"]
    assert trainer["spec"]["volumes"] == [{"name": "hf", "secret": {}}]
    assert "secretKeyRef" not in json.dumps(snapshot) and '"hf"' not in json.dumps(trainer["spec"]["containers"][0]["env"])
