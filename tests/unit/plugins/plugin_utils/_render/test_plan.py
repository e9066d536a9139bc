# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan summary of a render folder (plugins/plugin_utils/_render/plan.py) on small crafted folders, and
the filter that hands it to role render_notice (plugins/filter/render_plan.py)."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.render_plan import render_plan
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._render import plan as _render_plan


def _write(root, rel, content):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def _request(root, number, method, url, body=None, api="gcp"):
    tail = "_".join(url.split("?")[0].rstrip("/").split("/")[-2:])
    return _write(root, "requests/%03d-%s-%s-%s.json" % (number, api, method.lower(), tail),
                  {"api": api, "method": method, "url": url, "body": body})


def _object(root, step, number, kind, name, namespace=None, delete=False):
    meta = "metadata:\n  name: %s\n" % name + ("  namespace: %s\n" % namespace if namespace else "")
    return _write(root, "manifests/%s/%02d-%s%s-%s.yaml" % (step, number, "delete-" if delete else "", kind.lower(), name),
                  "apiVersion: v1\nkind: %s\n%s" % (kind, meta))


def _gpu(index, instances, mig=True, model="H100-80GB"):
    return {"index": index, "model": model, "mig_mode_current": mig, "mig_mode_pending": mig,
            "instances": [{"profile": p, "start": s, "size": 1, "compute_instances": [{"slices": 1}] * cis}
                          for p, s, cis in instances]}


GCE = "https://compute.googleapis.com/compute/v1/projects/p"
GKE = "https://container.googleapis.com/v1/projects/p/locations/us-central1"
ARM = "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService"


# ------------------------------------------------------------------ empty folder


def test_an_empty_folder_plans_nothing(tmp_path):
    summary = _render_plan.summarize(str(tmp_path), ["a3mega-demo"])
    assert summary["files"] == 0
    assert summary["headline"] == "plans nothing to create or change, deletes 0"
    assert "The render wrote no file." in summary["markdown"]
    assert "## " not in summary["markdown"]


def test_hidden_bookkeeping_and_the_summary_itself_are_not_plan_files(tmp_path):
    _write(tmp_path, ".gpu_ops_render", "complete: true\n")
    _write(tmp_path, ".gpu_ops_render_hosts/h.txt", "nccl/nccl.conf\n")
    _write(tmp_path, "PLAN.md", "# old\n")
    _write(tmp_path, "nccl/nccl.conf", "NCCL_NET=IB\n")
    assert _render_plan.plan_files(str(tmp_path)) == ["nccl/nccl.conf"]


# ------------------------------------------------------------------ cloud requests


@pytest.mark.parametrize("method, url, body, expected", [
    ("POST", GCE + "/global/networks", {"name": "fab-1", "mtu": 8244}, ("create", "network", "fab-1")),
    ("POST", GKE + "/clusters", {"cluster": {"name": "c1"}}, ("create", "cluster", "c1")),
    ("POST", GKE + "/clusters/c1/nodePools", {"nodePool": {"name": "pool"}}, ("create", "node pool", "pool")),
    ("PUT", ARM + "/managedClusters/aks/agentPools/migpool?api-version=2024-05-01", {"properties": {}},
     ("create", "agent pool", "migpool")),
    ("DELETE", GKE + "/clusters/c1/nodePools/pool", None, ("delete", "node pool", "pool")),
    ("DELETE", GCE + "/regions/us-central1/subnetworks/fab-1-sub", None, ("delete", "subnetwork", "fab-1-sub")),
    ("PATCH", GCE + "/global/firewalls/fab-1-internal", {"sourceRanges": []}, ("change", "firewall", "fab-1-internal")),
    ("POST", GKE + "/clusters/c1/nodePools/pool:setSize", {"nodeCount": 2}, ("change", "node pool (setSize)", "pool")),
    ("POST", GKE + "/clusters/c1/nodePools/pool/setManagement", {}, ("change", "node pool (setManagement)", "pool")),
])
def test_a_request_is_an_action_on_a_kind_of_resource_with_a_name(method, url, body, expected):
    assert _render_plan.cloud_request({"api": "gcp", "method": method, "url": url, "body": body})[:3] == expected


def test_requests_are_grouped_as_create_change_delete_by_kind(tmp_path):
    _request(tmp_path, 1, "POST", GCE + "/global/networks", {"name": "fab-1"})
    _request(tmp_path, 2, "POST", GCE + "/global/networks", {"name": "fab-2"})
    _request(tmp_path, 3, "PATCH", GCE + "/global/firewalls/fab-1-internal", {})
    _request(tmp_path, 4, "DELETE", GKE + "/clusters/old", None)
    summary = _render_plan.summarize(str(tmp_path), ["c1"])
    text = summary["markdown"]
    assert summary["headline"] == "creates 2 cloud resources, changes 1 cloud resource, deletes 1 (1 cloud resource)"
    assert "- create 2:\n  - 2 networks: `fab-1`, `fab-2`" in text
    assert "- change 1:\n  - 1 firewall: `fab-1-internal`" in text
    assert "- delete 1:\n  - 1 cluster: `old`" in text
    assert text.index("- create 2") < text.index("- change 1") < text.index("- delete 1")


def test_a_long_list_shows_its_first_names_and_a_count(tmp_path):
    for index in range(1, 21):
        _request(tmp_path, index, "POST", GCE + "/global/networks", {"name": "net-%02d" % index})
    text = _render_plan.summarize(str(tmp_path), ["c1"])["markdown"]
    assert "20 networks: `net-01`, `net-02`, `net-03`, `net-04`, `net-05`, `net-06`, … 14 more" in text
    assert "net-07" not in text


# ------------------------------------------------------------------ Kubernetes objects and Helm releases


def test_objects_per_step_with_kind_name_namespace_and_deletions(tmp_path):
    _object(tmp_path, "20-nets", 1, "GKENetworkParamSet", "vpc1")
    _object(tmp_path, "20-nets", 2, "Network", "vpc1")
    _object(tmp_path, "40-test", 1, "Pod", "runner", namespace="jobs")
    _object(tmp_path, "50-old", 1, "DaemonSet", "legacy", namespace="kube-system", delete=True)
    summary = _render_plan.summarize(str(tmp_path), ["c1"])
    text = summary["markdown"]
    assert summary["headline"] == ("applies 3 Kubernetes objects in 2 steps, deletes 1 (1 Kubernetes object)")
    assert "| `20-nets` | apply | 1 GKENetworkParamSet, 1 Network | `GKENetworkParamSet/vpc1`, `Network/vpc1` |" in text
    assert "| `40-test` | apply | 1 Pod | `Pod/runner (ns jobs)` |" in text
    assert "| `50-old` | delete | 1 DaemonSet | `DaemonSet/legacy (ns kube-system)` |" in text


def test_helm_releases_with_chart_version_namespace_and_uninstall(tmp_path):
    _write(tmp_path, "charts/30-gpu-operator/gpu-operator.yaml",
           "chart_ref: gpu-operator\nchart_repo_url: https://helm.ngc.nvidia.com/nvidia\nrelease_name: gpu-operator\n"
           "release_namespace: gpu-operator\nchart_version: v25.10.1\nvalues: {}\nstate: present\n")
    _write(tmp_path, "charts/10-old/old.yaml", "chart_ref: old\nrelease_name: old\nrelease_namespace: x\nchart_version: 1.0.0\n"
           "state: absent\n")
    summary = _render_plan.summarize(str(tmp_path), ["k8s"])
    assert summary["headline"] == "installs 1 Helm release, deletes 1 (1 Helm release)"
    assert ("- install `gpu-operator`: chart `gpu-operator` v25.10.1 in namespace `gpu-operator` (step `30-gpu-operator`)"
            in summary["markdown"])
    assert "- uninstall `old`: chart `old` 1.0.0 in namespace `x` (step `10-old`)" in summary["markdown"]


# ------------------------------------------------------------------ bare-metal hosts: MIG, MPS, nccl.conf


def test_the_mig_plan_is_a_table_per_gpu_with_alike_neighbours_sharing_a_row(tmp_path):
    mixed = [("2g.20gb", 0, 1), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 1)]
    gpus = [_gpu(0, mixed), _gpu(1, mixed), _gpu(2, [("3g.40gb", 4, 3)]), _gpu(3, [], mig=False)]
    changes = [{"action": "create", "kind": "gpu_instance", "name": "gpu%d/x" % g} for g in (0, 0, 0, 0, 1, 1, 1, 1, 2)]
    changes += [{"action": "update", "kind": "mig_mode", "name": "gpu%d" % g, "fields": ["mig"]} for g in (0, 1, 2)]
    _write(tmp_path, "checks/gpu_hosts/hgx-1/mig-plan.json", {"changes": changes, "gpus": gpus})
    summary = _render_plan.summarize(str(tmp_path), ["hgx-1"])
    text = summary["markdown"]
    assert summary["headline"] == "creates 9 MIG instances on 3 GPUs of 1 host, deletes 0"
    assert "create 9 GPU instances, update MIG mode on 3 GPUs" in text
    assert "| GPU | model | MIG | GPU instances | changes |" in text
    assert "| 0-1 | H100-80GB | on | 1× 2g.20gb, 2× 1g.10gb, 1× 3g.40gb | create 4 GPU instances, update MIG mode |" in text
    assert "| 2 | H100-80GB | on | 1× 3g.40gb (3 compute instances) | create 1 GPU instance, update MIG mode |" in text
    assert "| 3 | H100-80GB | off | - | none |" in text


def test_mig_instances_to_delete_count_as_deletions(tmp_path):
    changes = [{"action": "delete", "kind": "gpu_instance", "name": "gpu0/1g.10gb@%d" % s} for s in range(7)]
    _write(tmp_path, "checks/gpu_hosts/hgx-1/mig-plan.json", {"changes": changes, "gpus": [_gpu(0, [], mig=False)]})
    summary = _render_plan.summarize(str(tmp_path), ["hgx-1"])
    assert summary["headline"] == "deletes 7 (7 MIG instances)"
    assert "| 0 | H100-80GB | off | - | delete 7 GPU instances |" in summary["markdown"]


def test_mps_settings_and_the_hosts_nccl_conf(tmp_path):
    _write(tmp_path, "checks/gpu_hosts/dgx-1/mps.json",
           {"visible_devices": ["4", "5"], "active_thread_percentage": 50, "pinned_device_mem_limit": {"4": "16G"},
            "exclusive_process": True, "mig": False})
    _write(tmp_path, "checks/gpu_hosts/dgx-1/nccl.conf", "# managed\nNCCL_NET=IB\nNCCL_IB_DISABLE=0\n")
    summary = _render_plan.summarize(str(tmp_path), ["dgx-1"])
    assert summary["headline"] == "configures MPS on 1 host, deletes 0"
    assert ("**MPS control daemon** (`checks/gpu_hosts/dgx-1/mps.json`): GPUs 4,5; active threads 50%; "
            "pinned memory 4=16G; EXCLUSIVE_PROCESS yes") in summary["markdown"]
    assert "- `checks/gpu_hosts/dgx-1/nccl.conf`: 2 variables (`NCCL_NET=IB`, `NCCL_IB_DISABLE=0`)" in summary["markdown"]


def test_awx_objects_count_in_the_headline(tmp_path):
    """awx_setup.yml's render: its objects are planned, not 'nothing to create or change'."""
    for name in ("10-organization.yaml", "20-project.yaml", "50-job_template-01-gke-gpudirect.yaml"):
        _write(tmp_path, "awx/" + name, "name: x\n")
    summary = _render_plan.summarize(str(tmp_path), ["localhost"])
    assert summary["headline"] == "creates or updates 3 AWX objects, deletes 0"
    _write(tmp_path, "awx/40-inventory-01-gpu-fleet.yaml", "name: y\n")
    assert _render_plan.summarize(str(tmp_path), [])["headline"] == "creates or updates 4 AWX objects, deletes 0"


# ------------------------------------------------------------------ several hosts


def test_files_go_to_the_host_the_index_names_and_host_folders_to_their_host(tmp_path):
    _request(tmp_path, 1, "POST", GKE + "/clusters", {"cluster": {"name": "east"}})
    _request(tmp_path, 2, "POST", GKE + "/clusters", {"cluster": {"name": "west"}})
    _object(tmp_path, "20-nets", 1, "Network", "vpc1")
    _write(tmp_path, "checks/gpu_hosts/node-1/nccl.conf", "NCCL_NET=IB\n")
    _write(tmp_path, "checks/40-check/expect.yaml", "{}\n")
    # absolute (as the cloud modules return them) or relative (as role apply writes them)
    _render_plan.record(str(tmp_path), "east", [str(tmp_path / "requests" / "001-gcp-post-us-central1_clusters.json"),
                                                "manifests/20-nets/01-network-vpc1.yaml"])
    _render_plan.record(str(tmp_path), "west", ["requests/002-gcp-post-us-central1_clusters.json", "/elsewhere/x.json"])
    assert (tmp_path / ".gpu_ops_render_hosts" / "west.txt").read_text() == "requests/002-gcp-post-us-central1_clusters.json\n"
    summary = _render_plan.summarize(str(tmp_path), ["localhost", "east", "west", "node-1"])
    text = summary["markdown"]
    sections = text.split("\n## ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == ["east", "west", "node-1", "Files of no single host"]
    assert "`east`" in sections[0] and "Network/vpc1" in sections[0] and "`west`" not in sections[0]
    assert "`west`" in sections[1]
    assert "checks/gpu_hosts/node-1/nccl.conf" in sections[2]
    assert "`40-check`" in sections[3]
    assert summary["headline"] == "creates 2 cloud resources, applies 1 Kubernetes object in 1 step, deletes 0"


def test_a_run_of_one_host_owns_every_file(tmp_path):
    _write(tmp_path, "nccl/nccl.conf", "NCCL_NET=IB\n")
    _write(tmp_path, "checks/40-check/expect.yaml", "{}\n")
    text = _render_plan.summarize(str(tmp_path), ["localhost", "a3mega-demo"])["markdown"]
    assert "## a3mega-demo" in text and "Files of no single host" not in text


def test_an_index_for_an_odd_host_name_is_not_written(tmp_path):
    assert _render_plan.record(str(tmp_path), "../evil", ["requests/001.json"]) == []
    assert not (tmp_path / ".gpu_ops_render_hosts").exists()


# ------------------------------------------------------------------ the filter


def test_the_filter_summarizes_a_folder_and_refuses_what_is_not_one(tmp_path):
    _write(tmp_path, "nccl/nccl.conf", "NCCL_NET=IB\n")
    assert render_plan(str(tmp_path), ["h"])["files"] == 1
    assert render_plan(str(tmp_path / "missing"))["files"] == 0  # --check: start created no folder
    with pytest.raises(AnsibleFilterError, match="is not a folder"):
        render_plan(str(tmp_path / "nccl" / "nccl.conf"))
    with pytest.raises(AnsibleFilterError, match="hosts must be a list"):
        render_plan(str(tmp_path), "h")
