# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ComputeDomain checks beyond the broken-cluster set (fixtures/clusters.yml): the health phase's IMEX channel probe,
the fix a daemon log's cause names, and what the snapshot keeps of the daemons and their logs."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import validate as validate_filter
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite

EMPTY = {"resources": []}


def _probe(section):
    base = snap.build_kubernetes("c", EMPTY, EMPTY, EMPTY, EMPTY, EMPTY)
    base["health"] = {"imex_channel": section}
    return dict((r["id"], r) for r in suite.validate(base, phases=["health"])["results"])["compute_domain.imex_channel"]


def _node(output, error=""):
    return {"output": output, "rc": 0, "error": error}


def test_one_channel_per_node_passes_with_the_channel_named():
    result = _probe({"nodes": {"a4x-0": _node("channel0\n"), "a4x-1": _node("channel0\n")}})
    assert result["status"] == "passed"
    assert result["evidence"] == ["node a4x-0: /dev/nvidia-caps-imex-channels/channel0",
                                  "node a4x-1: /dev/nvidia-caps-imex-channels/channel0"]


@pytest.mark.parametrize("output, text", [
    ("", "node a4x-1: the probe pod sees 0 IMEX channels under /dev/nvidia-caps-imex-channels (none); exactly one"),
    ("channel0\nchannel1\n", "node a4x-1: the probe pod sees 2 IMEX channels under /dev/nvidia-caps-imex-channels (channel0, channel1)"),
    ("ls: cannot access '/dev/nvidia-caps-imex-channels/': No such file or directory\n", "sees 0 IMEX channels"),
])
def test_no_channel_or_more_than_one_fails_naming_the_node(output, text):
    result = _probe({"nodes": {"a4x-0": _node("channel0\n"), "a4x-1": _node(output)}})
    assert result["status"] == "failed" and text in result["message"]
    assert "a4x-0" not in result["message"] and result["evidence"] == ["node a4x-0: /dev/nvidia-caps-imex-channels/channel0"]


def test_a_probe_that_could_not_run_is_other_never_passed():
    held = _node("", error="probe pod vhealth-1-imex-1 did not finish within 600 s (phase Pending)")
    result = _probe({"nodes": {"a4x-0": _node("channel0\n"), "a4x-1": held}})
    assert result["status"] == "other" and "phase Pending" in result["message"]
    failed = _probe({"nodes": {"a4x-0": _node(""), "a4x-1": held}})
    assert failed["status"] == "failed" and failed["evidence"] == ["cannot decide: node a4x-1: " + held["error"]]
    assert _probe({"error": "the ComputeDomain could not be created"})["status"] == "other"
    assert _probe({"nodes": {}})["status"] == "other"


def test_the_probe_skips_with_its_reason():
    result = _probe({"skipped": "not applicable: no Ready node carries the nvidia.com/gpu.clique label"})
    assert result["status"] == "skipped" and "nvidia.com/gpu.clique" in result["message"]
    base = snap.build_kubernetes("c", EMPTY, EMPTY, EMPTY, EMPTY, EMPTY)
    offline = dict((r["id"], r) for r in suite.validate(base, phases=["health"])["results"])["compute_domain.imex_channel"]
    assert offline["status"] == "skipped" and "live cluster" in offline["message"]


def test_a_host_imex_cause_names_the_host_service_fix_and_a_plain_one_the_checks_own():
    check = suite.CHECKS_BY_ID["compute_domain.ready"]
    assert "systemctl mask nvidia-imex.service" in check.fixes["host_imex"]["manual"]
    assert "HostManagedIMEXDaemon" in check.fixes["host_imex"]["manual"]
    assert set(check.fixes) == {"host_imex", "no_interface"}


def _pod(name, ready, container="compute-domain-daemon", phase="Running"):
    return {"metadata": {"name": name, "namespace": "nvidia-dra-driver-gpu"},
            "spec": {"nodeName": "n-" + name, "containers": [{"name": container, "image": "x"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": container, "ready": ready}]}}


def test_the_daemons_whose_logs_are_read_are_those_not_ready():
    snapshot = {"kubernetes": {"pods": [_pod("ok", True), _pod("crashing", False), _pod("pending", False, phase="Pending"),
                                        _pod("other", False, container="trainer")]}}
    assert snap.compute_domain_daemons(snapshot) == [
        {"namespace": "nvidia-dra-driver-gpu", "pod": "crashing", "node": "n-crashing", "container": "compute-domain-daemon"},
        {"namespace": "nvidia-dra-driver-gpu", "pod": "pending", "node": "n-pending", "container": "compute-domain-daemon"}]
    assert snap.compute_domain_daemons({"kubernetes": {"pods": None}}) == []


def test_only_the_cause_lines_of_a_log_are_kept_shortened():
    log = "starting\nsecret-token=abc\nE: NV_ERR_IN_USE " + "x" * 400 + "\nno matching network interface for 10.0.0.1\n"
    lines = snap.cause_lines(log)
    assert len(lines) == 2 and lines[0].startswith("E: NV_ERR_IN_USE") and len(lines[0]) == 300
    assert lines[1] == "no matching network interface for 10.0.0.1"
    assert snap.cause_lines(None) == [] and snap.cause_lines("\n".join(["NV_ERR_IN_USE %d" % i for i in range(30)]))[0] == "NV_ERR_IN_USE 10"


def test_the_filter_lists_the_daemons_then_adds_their_cause_lines():
    base = snap.build_kubernetes("c", EMPTY, EMPTY, {"resources": []}, EMPTY, EMPTY)
    assert validate_filter.validate_compute_domain_daemons(base) == []
    registered = [{"__validate_daemon": {"namespace": "d", "pod": "p", "node": "n"}, "log": "ok\nNV_ERR_IN_USE\n"},
                  {"__validate_daemon": {"namespace": "d", "pod": "q", "node": "m"}, "failed": True, "msg": "forbidden"}]
    with_logs = validate_filter.validate_compute_domain_daemons(base, registered)
    assert with_logs["kubernetes"]["compute_domain_daemon_logs"] == [
        {"namespace": "d", "pod": "p", "node": "n", "lines": ["NV_ERR_IN_USE"]},
        {"namespace": "d", "pod": "q", "node": "m", "lines": []}]
    assert "compute_domain_daemon_logs" not in base["kubernetes"] or base["kubernetes"]["compute_domain_daemon_logs"] is None
    for bad, text in ((None, "the input must be a validation snapshot"),):
        with pytest.raises(AnsibleFilterError, match=text):
            validate_filter.validate_compute_domain_daemons(bad)
    with pytest.raises(AnsibleFilterError, match="logs must be a list, got dict"):
        validate_filter.validate_compute_domain_daemons(base, {})
    with pytest.raises(AnsibleFilterError, match="not the validate role's registered log reads"):
        validate_filter.validate_compute_domain_daemons(base, [{"log": "x"}])


def test_a_resource_slice_keeps_its_driver_node_and_device_count_only():
    read = {"resources": [{"metadata": {"name": "s", "uid": "u"}, "spec": {
        "driver": "compute-domain.nvidia.com", "nodeName": "n", "pool": {"name": "n"},
        "devices": [{"name": "channel-0", "attributes": {"id": {"int": 0}}}]}}]}
    built = snap.build_kubernetes("c", EMPTY, EMPTY, EMPTY, resource_slices=read)
    assert built["kubernetes"]["resource_slices"] == [{"metadata": {"name": "s"}, "spec": {
        "driver": "compute-domain.nvidia.com", "nodeName": "n", "pool": {"name": "n"}, "devices": 1}}]
    assert snap.loaded(built)["kubernetes"]["resource_slices"] == built["kubernetes"]["resource_slices"]
    failed = snap.build_kubernetes("c", EMPTY, EMPTY, EMPTY, resource_slices={"failed": True, "msg": "404 Not Found"})
    assert failed["kubernetes"]["resource_slices"] is None and failed["read_errors"]["kubernetes.resource_slices"] == "404 Not Found"


def _k8s_node(name, clique=None, ready="True"):
    labels = {"nvidia.com/gpu.clique": clique} if clique is not None else {}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def test_the_dra_objects_are_read_only_where_a_ready_node_carries_a_clique_label():
    reads = validate_filter.validate_compute_domain_reads([_k8s_node("a"), _k8s_node("b", "uuid.1")])
    assert reads == [{"key": "resource_slices", "api_version": "resource.k8s.io/v1", "kind": "ResourceSlice"},
                     {"key": "compute_domains", "api_version": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain"}]
    assert validate_filter.validate_compute_domain_reads([_k8s_node("a"), _k8s_node("b", "")]) == []
    assert validate_filter.validate_compute_domain_reads([_k8s_node("b", "uuid.1", ready="False"), "not-a-node"]) == []
    assert validate_filter.validate_compute_domain_reads([]) == []
    with pytest.raises(AnsibleFilterError, match="the input must be the list of Node objects read, got dict"):
        validate_filter.validate_compute_domain_reads({"resources": []})


def test_a_not_ready_domain_whose_daemon_logs_were_not_read_says_so():
    nodes = {"resources": [{"metadata": {"name": "a4x-0", "labels": {"nvidia.com/gpu.clique": "u.1"}},
                            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]}
    domains = {"resources": [{"metadata": {"name": "cd", "namespace": "ml"}, "status": {"status": "NotReady", "nodes": []}}]}
    built = snap.build_kubernetes("c", nodes, EMPTY, EMPTY, resource_slices=EMPTY, compute_domains=domains)
    result = dict((r["id"], r) for r in suite.validate(built)["results"])["compute_domain.ready"]
    assert result["status"] == "failed"
    assert result["message"] == "ComputeDomain ml/cd is NotReady; status.nodes: none; the daemons' logs were not read"


def test_a_probe_error_is_shortened_to_300_characters():
    result = _probe({"error": "x" * 400})
    assert result["status"] == "other" and ("x" * 300 + ")") in result["message"] and "x" * 301 not in result["message"]
