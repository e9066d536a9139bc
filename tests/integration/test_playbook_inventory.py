# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory drives every playbook (issue #20 §2).

- a playbook given an inventory without the group it runs on (or a --limit that leaves none of its hosts) fails
  once, naming the group, the variable that overrides it and an example inventory, before anything is written;
  Ansible alone would print "skipping: no hosts matched" and exit 0 having done nothing;
- gke_gpudirect.yml (and its teardown) fail per cluster naming every required variable it misses, before the
  first request: no hidden default (gke_gpu_cluster_gpudirect used to fall back to tcpxo).

All in render mode: no credentials, nothing to contact, a few seconds per run.
"""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

CHECK = "Check that the inventory has hosts for every play"


def _inventory(name):
    return ("-i", str(REPO_ROOT / "inventories" / name))


def _run(run_playbook, tmp_path, playbook, *args, **extra_vars):
    render = tmp_path / "render"
    result = run_playbook(str(REPO_ROOT / "playbooks" / playbook), extra_vars=dict(extra_vars, gpu_ops_render_dir=str(render)),
                          extra_args=args)
    return render, result


def _check_message(result):
    failed = [r for r in result.failed if CHECK in r["task"]]
    assert len(failed) == 1, result.output
    return failed[0]["result"]["msg"]


# playbook, an inventory of the repository without its group, the group, the variable, the example inventory
WITHOUT_THE_GROUP = [
    ("aks_mig.yml", "gke", "aks_clusters", "aks_mig_hosts", "inventories/aks"),
    ("gke_gpudirect.yml", "aks", "gke_clusters", "gke_gpudirect_hosts", "inventories/gke"),
    ("gke_gpudirect_teardown.yml", "baremetal", "gke_clusters", "gke_gpudirect_hosts", "inventories/gke"),
    ("site.yml", "aks", "gke_clusters", "gke_gpudirect_hosts", "inventories/local"),
    ("gpu_hosts.yml", "gke", "gpu_hosts", "gpu_hosts_target", "inventories/baremetal"),
    ("gpu_operator.yml", "baremetal", "k8s_clusters", None, "inventories/baremetal-k8s"),
]


@pytest.mark.parametrize("playbook, inventory, group, variable, example", WITHOUT_THE_GROUP,
                         ids=[case[0] for case in WITHOUT_THE_GROUP])
def test_an_inventory_without_the_group_fails_saying_so(run_playbook, tmp_path, playbook, inventory, group, variable, example):
    render, result = _run(run_playbook, tmp_path, playbook, *_inventory(inventory))
    assert result.rc != 0, result.output
    message = _check_message(result)
    assert message.startswith("playbooks/%s runs on the inventory hosts of %s (" % (playbook, group)), message
    assert "and the inventory has none: nothing was done" in message and "(example: -i %s)" % example in message
    if variable:
        assert "-e %s=PATTERN" % variable in message
    # before anything is written: not even the render folder
    assert not render.exists()
    assert [r for r in result.results if r["status"] == "ok" and "render_notice" not in r["task"]
            and CHECK not in r["task"]] == [], result.output


def test_gpu_operator_names_each_group_it_misses(run_playbook, tmp_path):
    """gpu_operator.yml runs on gpu_hosts and on k8s_clusters: an inventory with neither gets one message for both."""
    render, result = _run(run_playbook, tmp_path, "gpu_operator.yml", *_inventory("aks"))
    message = _check_message(result)
    assert "inventory hosts of gpu_hosts (" in message and "inventory hosts of k8s_clusters (" in message
    assert not render.exists()


def test_a_limit_that_leaves_none_of_the_group_fails_saying_so(run_playbook, tmp_path):
    """The fleet has AKS clusters, but --limit keeps only bare-metal hosts: say so, do not exit 0."""
    render, result = _run(run_playbook, tmp_path, "aks_mig.yml", *_inventory("fleet"), "--limit", "gpu_hosts")
    assert result.rc != 0, result.output
    message = _check_message(result)
    assert ("runs on the inventory hosts of aks_clusters (one host per AKS cluster, connection local), and --limit "
            "gpu_hosts leaves none of its 2 (aks-a100-eastus, aks-a100-westeurope): nothing was done") in message
    assert not render.exists()


def test_the_pattern_variable_picks_the_clusters_and_each_keeps_its_files(run_playbook, tmp_path):
    """-e gke_gpudirect_hosts picks the clusters (the fleet's two TCPX ones): the check follows it, every request of
    both is kept, and neither cluster's manifests overwrite the other's (each step carries its inventory host)."""
    render, result = _run(run_playbook, tmp_path, "gke_gpudirect.yml", *_inventory("fleet"), gke_gpudirect_hosts="a3_high_tcpx")
    result.assert_ok()
    hosts = ["a3high-europe-west4", "a3high-us-east4"]
    assert sorted({r["host"] for r in result.tasks("Check the required settings of cluster")}) == hosts
    requests = sorted((render / "requests").iterdir())
    assert len(requests) == 2 * (3 * 4 + 2)  # per TCPX cluster: 4 x (network, subnet, firewall), cluster, node pool
    assert [p.name[:3] for p in requests] == ["%03d" % n for n in range(1, len(requests) + 1)]
    for host in hosts:
        assert sum(1 for p in requests if host in p.read_text(encoding="utf-8")) >= 2, host
        for step, count in (("20-gke-gpu-networks", 8), ("30-gpudirect-tcpx-installer", 1), ("31-nri-device-injector", 1)):
            assert len(list((render / "manifests" / (step + "-" + host)).iterdir())) == count, (step, host)
    render, result = _run(run_playbook, tmp_path / "none", "gke_gpudirect.yml", *_inventory("fleet"),
                          gke_gpudirect_hosts="no_such_group")
    assert "runs on the inventory hosts of no_such_group (" in _check_message(result)


def _gke_inventory(tmp_path, **missing):
    """inventories/gke's cluster with some of its required variables left out (None: not set at all)."""
    values = yaml.safe_load((REPO_ROOT / "inventories/gke/group_vars/gke_clusters.yml").read_text(encoding="utf-8"))
    for name in missing:
        values.pop(name)
    path = tmp_path / "gke.yml"
    path.write_text(yaml.safe_dump({"gke_clusters": {"hosts": {"a3mega-demo": dict(
        values, ansible_connection="local", ansible_python_interpreter="{{ ansible_playbook_python }}")}}}), encoding="utf-8")
    return ("-i", str(path))


@pytest.mark.parametrize("playbook, names", [
    ("gke_gpudirect.yml", ["gke_gpu_cluster_gpudirect"]),
    ("gke_gpudirect.yml", ["gke_gpu_cluster_location", "gke_gpu_cluster_version"]),
    ("gke_gpudirect_teardown.yml", ["gke_gpu_cluster_project", "gke_gpu_cluster_gpudirect"]),
])
def test_a_cluster_without_a_required_variable_fails_naming_it_before_any_request(run_playbook, tmp_path, playbook, names):
    render, result = _run(run_playbook, tmp_path, playbook, *_gke_inventory(tmp_path, **dict.fromkeys(names)))
    assert result.rc != 0, result.output
    failed = result.failed
    assert [r["task"] for r in failed] == ["Check the required settings of cluster a3mega-demo"], result.output
    assert failed[0]["result"]["msg"].startswith("a3mega-demo: required and not set: %s (" % ", ".join(names))
    assert not (render / "requests").exists() and not (render / "manifests").exists()


def test_gpu_hosts_render_without_the_gpu_model_fails_naming_it(run_playbook, tmp_path):
    """Render mode plans a host's MIG geometry from its GPU model and count: missing (or null), they are named."""
    render, result = _run(run_playbook, tmp_path, "gpu_hosts.yml", *_inventory("baremetal"), "--limit", "dgx-a100-01",
                          gpu_hosts_gpu_model=None)
    assert result.rc != 0, result.output
    assert [r["task"] for r in result.failed] == ["Check what render mode needs of dgx-a100-01"], result.output
    assert result.failed[0]["result"]["msg"].startswith(
        "dgx-a100-01: required in render mode and not set: gpu_hosts_gpu_model (")
    assert not (render / "checks").exists()
