# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every filter refuses what it cannot judge: one table, one AnsibleFilterError naming the argument each.

A hostile new user's inputs: wrong types, null (a missing capture is not "no GPUs"), negative and
non-finite numbers, text where a boolean belongs ("no" is truthy), non-dict items in lists of
Kubernetes objects, unquoted versions. None of them may pass silently.
"""

from __future__ import annotations

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import bandwidth, gpudirect, mig, nccl_tests, nvsmi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "fixtures", "nccl_tests")
GKE = "1.32.2-gke.1489001"
TCPX_NETS = ["vpc1", "vpc2", "vpc3", "vpc4"]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
NODE = {"metadata": {"name": "n1"}}


def _text():
    with open(os.path.join(FIXTURES, "guide_tcpx_all_gather.txt"), encoding="utf-8") as handle:
        return handle.read()


def _run(**changes):
    run = nccl_tests.nccl_tests_parse(_text())
    run.update(changes)
    return run


def _run_with_row_busbw(value):
    run = _run()
    run["rows"][2]["in_place"]["busbw"] = value
    return run


CASES = [
    # --- bandwidth_report
    ("bandwidth_report: null result", lambda: bandwidth.bandwidth_report(None, "nccl"), "input: must be a dict"),
    ("bandwidth_report: unknown kind", lambda: bandwidth.bandwidth_report({}, "iperf"), "kind: must be one of nccl, ib_write_bw"),
    ("bandwidth_report: nan threshold", lambda: bandwidth.bandwidth_report({"threshold": float("nan")}, "nccl"),
     "threshold: must be a finite number"),
    ("bandwidth_report: row without a size", lambda: bandwidth.bandwidth_report({"table": [{"count": 1}]}, "nccl"),
     "rows[0].size: must be a whole number"),
    ("bandwidth_report: zero-byte row", lambda: bandwidth.bandwidth_report({"rows": [{"bytes": 0}]}, "ib_write_bw"),
     "rows[0].bytes: must be at least 1"),
    ("bandwidth_report: nodes as text", lambda: bandwidth.bandwidth_report({}, "nccl", nodes="a,b"), "nodes: must be a list"),
    # --- nccl_tests_verdict
    ("nccl_tests_verdict: negative threshold", lambda: nccl_tests.nccl_tests_verdict(_run(), threshold=-1),
     "threshold (GB/s): must be at least 0"),
    ("nccl_tests_verdict: text threshold", lambda: nccl_tests.nccl_tests_verdict(_run(), threshold="fast"),
     "threshold (GB/s): must be a number"),
    ("nccl_tests_verdict: nan threshold", lambda: nccl_tests.nccl_tests_verdict(_run(), threshold=float("nan")),
     "threshold (GB/s): must be a finite number"),
    ("nccl_tests_verdict: inf threshold", lambda: nccl_tests.nccl_tests_verdict(_run(), threshold=float("inf")),
     "threshold (GB/s): must be a finite number"),
    ("nccl_tests_verdict: boolean threshold", lambda: nccl_tests.nccl_tests_verdict(_run(), threshold=True),
     "threshold (GB/s): must be a number"),
    ("nccl_tests_verdict: nan average", lambda: nccl_tests.nccl_tests_verdict(_run(avg_bus_bandwidth=float("nan")), 1),
     "avg_bus_bandwidth: must be a finite number"),
    ("nccl_tests_verdict: inf row bandwidth", lambda: nccl_tests.nccl_tests_verdict(_run_with_row_busbw(float("inf"))),
     "rows[2] (size"),
    ("nccl_tests_verdict: nan row bandwidth", lambda: nccl_tests.nccl_tests_verdict(_run_with_row_busbw(float("nan"))),
     "in_place busbw: must be a finite number"),
    ("nccl_tests_verdict: text row bandwidth", lambda: nccl_tests.nccl_tests_verdict(_run_with_row_busbw("inf")),
     "in_place busbw: must be a finite number"),
    ("nccl_tests_verdict: negative row bandwidth", lambda: nccl_tests.nccl_tests_verdict(_run_with_row_busbw(-3.0)),
     "in_place busbw: must be at least 0"),
    ("nccl_tests_verdict: 'inf' in the output text",
     lambda: nccl_tests.nccl_tests_verdict(_text().replace("29.8293", "inf", 1).replace(" 71.28 ", "   inf ", 1)),
     "must be a finite number"),
    ("nccl_tests_verdict: rows not a list", lambda: nccl_tests.nccl_tests_verdict(_run(rows="many")),
     "rows: must be a list"),
    ("nccl_tests_verdict: negative min_rows", lambda: nccl_tests.nccl_tests_verdict(_run(), min_rows=-1),
     "min_rows: must be at least 0"),
    ("nccl_tests_verdict: text min_rows", lambda: nccl_tests.nccl_tests_verdict(_run(), min_rows="ten"),
     "min_rows: must be a whole number"),
    ("nccl_tests_verdict: fabric as a list", lambda: nccl_tests.nccl_tests_verdict(_run(), fabric=["tcpx"]),
     "fabric ['tcpx'] is not one of"),
    ("nccl_tests_verdict: null run", lambda: nccl_tests.nccl_tests_verdict(None), "expected a parsed run"),
    # --- nccl_tests_parse
    ("nccl_tests_parse: null input", lambda: nccl_tests.nccl_tests_parse(None), "input: is null"),
    ("nccl_tests_parse: lines instead of text", lambda: nccl_tests.nccl_tests_parse(["#  size  count"]),
     "input: must be command output text"),
    ("nccl_tests_parse: all_runs as text", lambda: nccl_tests.nccl_tests_parse(_text(), all_runs="no"),
     "all_runs: must be true or false"),
    # --- nvsmi_parse / nvsmi_listing_problems
    ("nvsmi_parse: null listing is not 'no GPUs'", lambda: nvsmi.nvsmi_parse(None), "input: is null"),
    ("nvsmi_parse: null lgi", lambda: nvsmi.nvsmi_parse(None, "lgi"), "input: is null"),
    ("nvsmi_parse: null csv", lambda: nvsmi.nvsmi_parse(None, "csv", fields=["index"]), "input: is null"),
    ("nvsmi_parse: a number", lambda: nvsmi.nvsmi_parse(0), "input: must be command output text"),
    ("nvsmi_parse: lines holding a number", lambda: nvsmi.nvsmi_parse(["GPU 0: x", 1]), "only strings"),
    ("nvsmi_parse: kind null", lambda: nvsmi.nvsmi_parse("GPU 0: x", None), "kind None is not one of"),
    ("nvsmi_listing_problems: null listing", lambda: nvsmi.nvsmi_listing_problems(None, "1g.5gb"), "input: is null"),
    ("nvsmi_listing_problems: null profile", lambda: nvsmi.nvsmi_listing_problems("", None), "profile: must be"),
    ("nvsmi_listing_problems: negative count", lambda: nvsmi.nvsmi_listing_problems("", "1g.5gb", -1),
     "count: must be at least 0"),
    ("nvsmi_listing_problems: exact as text", lambda: nvsmi.nvsmi_listing_problems("", "1g.5gb", 1, "no"),
     "exact: must be true or false"),
    # --- MIG filters
    ("mig_expected_resources: boolean gpus", lambda: mig.mig_expected_resources("A100-40GB", True, "1g.5gb"),
     "gpus must be a whole number"),
    ("mig_expected_resources: zero gpus", lambda: mig.mig_expected_resources("A100-40GB", 0, "1g.5gb"),
     "gpus must be at least 1"),
    ("mig_expected_resources: negative gpus as text", lambda: mig.mig_expected_resources("A100-40GB", "-8", "1g.5gb"),
     "gpus must be at least 1"),
    ("mig_expected_resources: null model", lambda: mig.mig_expected_resources(None, 8, "1g.5gb"), "gpu_model must be"),
    ("mig_expected_resources: sharing as text",
     lambda: mig.mig_expected_resources("A100-40GB", 8, "1g.5gb", sharing="time-slicing"), "sharing: must be a dict"),
    ("mig_expected_labels: sharing as a list",
     lambda: mig.mig_expected_labels("A100-40GB", 8, "1g.5gb", sharing=["mps"]), "sharing: must be a dict"),
    ("mig_verify_nodes: a node that is text", lambda: mig.mig_verify_nodes(["n1"], {"nvidia.com/gpu": 1}),
     "nodes[0]: must be a Kubernetes object"),
    ("mig_verify_nodes: a null node", lambda: mig.mig_verify_nodes([NODE, None], {"nvidia.com/gpu": 1}),
     "nodes[1]: must be a Kubernetes object"),
    ("mig_verify_nodes: min_nodes as text", lambda: mig.mig_verify_nodes([], {}, min_nodes="two"),
     "min_nodes: must be a whole number"),
    ("mig_verify_nodes: negative min_nodes", lambda: mig.mig_verify_nodes([], {}, min_nodes=-1),
     "min_nodes: must be at least 0"),
    ("mig_verify_nodes: resources as a list", lambda: mig.mig_verify_nodes([], ["nvidia.com/gpu"]),
     "resources: must be a dict"),
    ("mig_verify_nodes: selector as text", lambda: mig.mig_verify_nodes([], {}, selector="pool=mig"),
     "selector: must be a dict"),
    ("mig_device_plugin_config: sharing as text", lambda: mig.mig_device_plugin_config("single", "mps"),
     "sharing: must be a dict"),
    ("mig_device_plugin_config: resources as a list", lambda: mig.mig_device_plugin_config("mixed", None, ["x"]),
     "resources must be a dict"),
    ("mig_device_plugin_config: fail_on_init_error as text",
     lambda: mig.mig_device_plugin_config("single", None, None, "yes"), "fail_on_init_error must be true or false"),
    ("mig_manager_problems: no node", lambda: mig.mig_manager_problems([], "all-balanced"), "non-empty list of Nodes"),
    ("mig_manager_problems: config as a number", lambda: mig.mig_manager_problems(["gpu-1"], 7, gpu_model="H100-80GB"),
     "config must be a mig-parted config name"),
    ("mig_manager_problems: unknown GPU model", lambda: mig.mig_manager_problems(["gpu-1"], "all-balanced", gpu_model="Z9"),
     "gpu_model: unknown GPU model 'Z9'"),
    ("mig_config_status: nodes as a dict", lambda: mig.mig_config_status({"metadata": {}}, "x"), "list of Node documents"),
    ("mig_config_status: negative event_count", lambda: mig.mig_config_status([], "x", event_count=-1),
     "event_count: must be"),
    ("mig_label_patches: a node name, not a list", lambda: mig.mig_label_patches("gpu-1", [], "x"), "list of node names"),
    ("mig_label_patches: null nodes (a failed read)", lambda: mig.mig_label_patches(["gpu-1"], None, "x"),
     "nodes must be a list of Node documents"),
    ("mig_placements: null request", lambda: mig.mig_placements("A100-40GB", None), "request must be"),
    ("mig_placements: empty request", lambda: mig.mig_placements("A100-40GB", {}), "request must be"),
    ("mig_parted_config: name with a path", lambda: mig.mig_parted_config("A100-40GB", "all-1g.5gb", name="../x"),
     "name: '../x' is not a mig-parted config name"),
    ("mig_parted_config: null name", lambda: mig.mig_parted_config("A100-40GB", "all-1g.5gb", name=None),
     "is not a mig-parted config name"),
    ("mig_parted_config: device_filter as text",
     lambda: mig.mig_parted_config("A100-40GB", "all-1g.5gb", device_filter="no"), "device_filter: must be true or false"),
    ("mig_parted_config: include_defaults as a number",
     lambda: mig.mig_parted_config("A100-40GB", "all-1g.5gb", include_defaults=0), "include_defaults: must be true"),
    # --- gpudirect_workload / gpudirect_profile / nccl_env
    ("gpudirect_workload: a list item that is text",
     lambda: gpudirect.gpudirect_workload([POD, "kind: Pod"], "tcpx", TCPX_NETS, gke_version=GKE),
     "item 1: must be a Kubernetes object (a dict), got str"),
    ("gpudirect_workload: a null list item",
     lambda: gpudirect.gpudirect_workload([None], "tcpx", TCPX_NETS, gke_version=GKE), "item 0: must be a Kubernetes"),
    ("gpudirect_workload: unquoted GKE version",
     lambda: gpudirect.gpudirect_workload(POD, "tcpx", TCPX_NETS, gke_version=1.30), "gke_version: must be a string"),
    ("gpudirect_workload: nan NCCL override",
     lambda: gpudirect.gpudirect_workload(POD, "tcpx", TCPX_NETS, gke_version=GKE,
                                          nccl_overrides={"NCCL_DEBUG": float("nan")}),
     "overrides.NCCL_DEBUG: must be a finite number"),
    ("compute_domain: null name", lambda: gpudirect.compute_domain(None), "compute_domain: name: None is not a Kubernetes"),
    ("compute_domain: namespace as a number", lambda: gpudirect.compute_domain("cd", namespace=7), "namespace: 7 is not"),
    ("gpudirect_workload: compute_domain as a name",
     lambda: gpudirect.gpudirect_workload(dict(POD, spec={"containers": [{"name": "c", "image": "x", "resources": {
         "limits": {"nvidia.com/gpu": 4}}}]}), "rdma-a4x", ["rdma-%d" % i for i in range(4)], compute_domain="cd"),
     "compute_domain: a ComputeDomain object"),
    ("gpudirect_profile: null name", lambda: gpudirect.gpudirect_profile(None), "name: must be a non-empty string"),
    ("gpudirect_profile: name as a list", lambda: gpudirect.gpudirect_profile(["tcpx"]), "name: must be"),
    ("gpudirect_profile: unquoted GKE version", lambda: gpudirect.gpudirect_profile("tcpx", gke_version=1.3),
     "quote it"),
    ("gpudirect_conflicts: settings as a list", lambda: gpudirect.gpudirect_conflicts(["tcpx_installer_image"], "rdma"),
     "settings: must be a dict"),
    ("gpudirect_conflicts: unknown profile", lambda: gpudirect.gpudirect_conflicts({}, "rdma2"),
     "'rdma2' is not a GPUDirect profile"),
    ("nccl_env: overrides as a list", lambda: gpudirect.nccl_env("roce", interfaces=["mlx5_0"], overrides=["A=1"]),
     "overrides: must be a dict"),
    ("nccl_env: inf override", lambda: gpudirect.nccl_env("socket", interfaces=["eth0"],
                                                          overrides={"NCCL_BUFFSIZE": float("inf")}),
     "overrides.NCCL_BUFFSIZE: must be a finite number"),
    ("nccl_env: override holding a dict", lambda: gpudirect.nccl_env("socket", interfaces=["eth0"],
                                                                     overrides={"NCCL_DEBUG": {"level": "INFO"}}),
     "overrides.NCCL_DEBUG: must be text or a number"),
    ("nccl_env: unquoted GKE version", lambda: gpudirect.nccl_env("tcpx", gke_version=1.32), "gke_version: must be"),
    # issue #24 section 3: what the target would refuse, named with its limit
    ("nccl_env: interface with a shell metacharacter", lambda: gpudirect.nccl_env("socket", interfaces=["eth0;reboot"]),
     "interfaces: 'eth0;reboot' is not 1 to 15 letters"),
    ("nccl_env: control interface of 16 bytes", lambda: gpudirect.nccl_env("roce", ctrl_interface="enp1s0f0np0vlan1"),
     "ctrl_interface: 'enp1s0f0np0vlan1' is not 1 to 15"),
    ("nccl_env: GKE version under the TCPX floor", lambda: gpudirect.nccl_env("tcpx", gke_version="1.27.6-gke.100"),
     "gke_version: GKE 1.27.6-gke.100 is below the minimum 1.27.7-gke.1121000 for tcpx on 1.27"),
]


def test_the_table_covers_every_filter():
    covered = {title.split(":")[0] for title, _call, _words in CASES}
    every = set()
    for module in (bandwidth, gpudirect, mig, nccl_tests, nvsmi):
        every |= set(module.FilterModule().filters())
    assert every - covered <= {"mig_aks_profile"}, every - covered  # its one argument pair is a catalog lookup
    assert len(set(t for t, _c, _w in CASES)) == len(CASES)


@pytest.mark.parametrize("title, call, words", CASES, ids=[c[0] for c in CASES])
def test_a_filter_refuses_what_it_cannot_judge(title, call, words):
    with pytest.raises(AnsibleFilterError) as error:
        call()
    message = str(error.value)
    assert message.startswith(title.split(":")[0] + ": "), message
    assert words in message, "%s: %s" % (title, message)
