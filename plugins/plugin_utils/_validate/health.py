# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The health checks: DCGM diagnostics, nvbandwidth and an NCCL loopback (all_reduce_perf across the GPUs of one
node) per node, judged from the captured outputs of the health phase's probes (the validate role runs them in probe
pods on a Kubernetes cluster, over SSH on a bare-metal host, and records them under the snapshot's ``health``), so a
captured output validates offline.

Snapshot shape (the validate role writes it)::

    health:
      level: 1                                           # the dcgmi diag run level
      dcgm:          {nodes: {<node>: {output, rc, error}}, skipped, error}
      nvbandwidth:   {floors: {<model>: {<testcase>: GB/s}}, nodes: {<node>: {model, output, rc, error}}, skipped, error}
      nccl_loopback: {floors: {<model>: GB/s}, nodes: {<node>: {model, gpus, output, rc, error}}, skipped, error}

Every result names the node and, where the tool does, the GPU. A failure anywhere fails the check with the rows that
failed; a node whose output cannot decide (no output, a killed probe, a skipped DCGM sub-test, a testcase nvbandwidth
waived, no floor for its GPU model) makes the check ``other`` with what would let it decide - never a pass.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver as _dra
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import health as _catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import dcgm_diag as _dcgm
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nccl_tests as _nccl_tests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nvbandwidth as _nvbandwidth
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.compute_domain import clique_nodes
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip, described_by, probe_record
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import View, node_labels, node_name

# each check's phase, title, reads, cause and fix: health.yml beside this file
described = described_by(__file__)


def _text(value, limit=300):
    return " ".join(str(value).split())[:limit]


def _section(view, key):
    """(section, {node: record}); Skip when the probe was not asked for or no health output was captured."""
    health = view.snapshot.get("health")
    if health is None:
        raise Skip("the snapshot holds no health probe output: the health probes run against a live cluster or host "
                   "(validate_phases with health, no validate_snapshot)")
    section = probe_record("health", health, key)
    nodes = section.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise Missing("health.%s.nodes" % key, "the probe recorded no node")
    return section, nodes


def _rc(record):
    rc = record.get("rc")
    try:
        return int(rc)
    except (TypeError, ValueError):
        return None


def _verdict(key, evidence, problems, undecided):
    """Failures first; a node that cannot be decided keeps the check from passing."""
    if problems:
        return evidence + ["cannot decide: %s" % u for u in undecided], problems
    if undecided:
        raise Missing("health.%s" % key, "; ".join(undecided))
    return evidence, problems


def _parsed(node, record, what, parse, error, undecided):
    """The parsed output of one node's probe, or None with the reason in ``undecided`` (it could not run, or its output
    cannot be read)."""
    if record.get("error") and not record.get("output"):
        undecided.append("%s: %s could not run: %s" % (node, what, _text(record["error"])))
        return None
    try:
        return parse(record.get("output"))
    except error as exc:
        undecided.append("%s: %s (exit code %s)" % (node, exc, record.get("rc")))
        return None


def _gpu_text(gpus):
    if not gpus:
        return "all GPUs"
    return "GPU %s" % ",".join(gpus)


@described("health.dcgm_diag")
def dcgm_diag(view):
    section, nodes = _section(view, "dcgm")
    level = (view.snapshot.get("health") or {}).get("level")
    evidence, problems, undecided = [], [], []
    for node in sorted(nodes):
        record = nodes[node] or {}
        parsed = _parsed(node, record, "the diagnostic", _dcgm.parse, _dcgm.DiagOutputError, undecided)
        if parsed is None:
            continue
        counts, warnings = {}, []
        for row in parsed["rows"]:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
            where = "%s %s %s" % (node, _gpu_text(row["gpus"]), row["test"])
            reason = "; ".join(row["warnings"] or row["info"])
            if row["status"] == "fail":
                problems.append("%s: failed%s" % (where, " - " + reason if reason else ""))
            elif row["status"] == "warn":
                warnings.append("%s: warning%s" % (where, " - " + reason if reason else ""))
            elif row["status"] == "skip":
                undecided.append("%s: skipped%s - a skipped sub-test is not a pass; run the level on a node where "
                                 "it applies or deselect health.dcgm_diag" % (where, " (" + reason + ")" if reason else ""))
            elif row["status"] == "unknown":
                undecided.append("%s: status %r is not one DCGM documents" % (where, row["raw_status"]))
        evidence.append("%s: dcgmi diag -r %s, DCGM %s: %s" % (
            node, level, parsed.get("version") or "?",
            ", ".join("%d %s" % (counts[s], s) for s in ("pass", "warn", "skip", "fail", "unknown") if s in counts)))
        evidence += warnings
        rc = _rc(record)
        if rc not in (None, 0) and not any(p.startswith(node + " ") for p in problems):
            undecided.append("%s: dcgmi exited with code %s but no test failed in its output" % (node, record.get("rc")))
    return _verdict("dcgm", evidence, problems, undecided)


@described("health.nvbandwidth")
def nvbandwidth(view):
    section, nodes = _section(view, "nvbandwidth")
    floors = dict(_catalog.NVBANDWIDTH_FLOORS)
    floors.update(section.get("floors") or {})
    evidence, problems, undecided = [], [], []
    for node in sorted(nodes):
        record = nodes[node] or {}
        model = record.get("model") or "?"
        parsed = _parsed(node, record, "nvbandwidth", _nvbandwidth.parse, _nvbandwidth.BandwidthOutputError, undecided)
        if parsed is None:
            continue
        node_floors = floors.get(model) or {}
        for name in _catalog.NVBANDWIDTH_TESTCASES:
            case = parsed["testcases"].get(name)
            floor = node_floors.get(name)
            if case is None:
                undecided.append("%s: nvbandwidth ran no %s (exit code %s)" % (node, name, record.get("rc")))
                continue
            if case["status"] == "Waived":
                if floor is not None:
                    undecided.append("%s: %s was waived by nvbandwidth (not applicable on this node) but has a floor" % (node, name))
                continue
            if case["status"] != "Passed":
                problems.append("%s: %s ended %s" % (node, name, case["status"] or "without a status"))
                continue
            low = _nvbandwidth.lowest(case["matrix"])
            if low is None:
                undecided.append("%s: %s has no measured cell" % (node, name))
                continue
            value, row, column = low
            evidence.append("%s (%s): %s lowest %.4g GB/s (row %d, column %d)%s" % (
                node, model, name, value, row, column, ", floor %s GB/s" % floor if floor is not None else ", no floor"))
            if floor is None:
                undecided.append("%s: no %s floor for GPU model %s (report only; NVIDIA publishes no nvbandwidth floor): set "
                                 "validate_health_nvbandwidth_floors, for example from this run's %.4g GB/s on a node known to be good"
                                 % (node, name, model, value))
            elif value < float(floor):
                problems.append("%s: %s %.4g GB/s between row %d and column %d (GPU index; CPU for host rows) is below "
                                "the %s GB/s floor of %s" % (node, name, value, row, column, floor, model))
    return _verdict("nvbandwidth", evidence, problems, undecided)


def _loopback_node(node, record, floors):
    """(state, evidence, texts) of one node's loopback: state ``failed`` (texts: its reasons), ``passed`` or ``undecided``
    (texts: why it cannot be decided); evidence the measured line, or None without a complete table."""
    model = record.get("model") or "?"
    if record.get("error") and not record.get("output"):
        return "undecided", None, ["%s: the loopback could not run: %s" % (node, _text(record["error"]))]
    runs = _nccl_tests.parse_all(record.get("output") or "")
    if not runs or runs[-1].get("avg_bus_bandwidth") is None:
        return "undecided", None, ["%s: no complete all_reduce_perf table (killed or cut short; exit code %s)" % (node, record.get("rc"))]
    run = runs[-1]
    floor = floors.get(model)
    verdict = _nccl_tests.verdict(run, threshold=floor)
    evidence = "%s (%s, %s GPUs): all_reduce average bus bandwidth %s GB/s%s" % (
        node, model, record.get("gpus") or "?", run["avg_bus_bandwidth"],
        ", floor %s GB/s" % floor if floor is not None else ", no floor")
    if verdict["reasons"]:
        return "failed", evidence, ["%s: %s" % (node, reason) for reason in verdict["reasons"]]
    if _rc(record) not in (None, 0):
        return "undecided", evidence, ["%s: all_reduce_perf exited with code %s after a complete table" % (node, record.get("rc"))]
    if floor is None:
        return "undecided", evidence, ["%s: no loopback floor for GPU model %s (report only): set validate_health_nccl_loopback_floors"
                                       % (node, model)]
    return "passed", evidence, []


@described("health.nccl_loopback")
def nccl_loopback(view):
    section, nodes = _section(view, "nccl_loopback")
    floors = section.get("floors") or {}
    evidence, problems, undecided = [], [], []
    for node in sorted(nodes):
        state, line, texts = _loopback_node(node, nodes[node] or {}, floors)
        if line is not None:
            evidence.append(line)
        if state == "failed":
            problems += texts
        else:
            undecided += texts
    return _verdict("nccl_loopback", evidence, problems, undecided)


def loopbacks(snapshot):
    """{node: (state, evidence, texts)} of the health phase's NCCL loopbacks in ``snapshot`` (see _loopback_node), so that
    the pairwise NCCL checks name the node a slow pair owes its bandwidth to; {} when the snapshot holds none (the
    health phase did not run, was skipped or could not run)."""
    section = (snapshot.get("health") or {}).get("nccl_loopback") or {}
    nodes = section.get("nodes")
    if section.get("skipped") or section.get("error") or not isinstance(nodes, dict):
        return {}
    floors = section.get("floors") or {}
    return dict((node, _loopback_node(node, nodes[node] or {}, floors)) for node in nodes)


# --------------------------------------------------------------------------------------------
# What the probes run on (the validate role's health phase reads this before it creates anything)
# --------------------------------------------------------------------------------------------

def _gpu_count(node):
    """The whole GPUs a pod can request on the node: its allocatable count (capacity only when allocatable is absent;
    a node that advertises 0 allocatable GPUs has none to give a probe)."""
    status = node.get("status") or {}
    for where in ("allocatable", "capacity"):
        value = (status.get(where) or {}).get(_mig.GPU_RESOURCE)
        if value is not None:
            try:
                return max(int(value), 0)
            except (TypeError, ValueError):
                return 0
    return 0


def _model(labels):
    return labels.get("nvidia.com/gpu.product") or labels.get("cloud.google.com/gke-accelerator") or None


def probe_plan(snapshot, dcgm_image=None):
    """dict(nodes: [dict(name, model, gpus)], shared, dcgm: dict(namespace, service, port, image) or None, dcgm_error,
    nvbandwidth_testcases, gpu_resource, no_nodes: why no probe runs when there is no node) of a snapshot.
    Kubernetes: the nodes with whole GPUs (``nvidia.com/gpu`` allocatable; a node that shares its GPUs or partitions
    them with MIG advertises other resources and is left to the MIG checks) and the
    GPU Operator's standalone DCGM host engine the diagnostic connects to. A host: itself, with its GPUs (the probes run
    there over SSH, against its own host engine)."""
    view = View(snapshot)
    testcases = list(_catalog.NVBANDWIDTH_TESTCASES)
    if view.kind == "host":
        gpus = (view.snapshot.get("host") or {}).get("gpus") or []
        return dict(nodes=[dict(name=view.snapshot["target"]["name"], model=(gpus[0].get("name") if gpus else None), gpus=len(gpus))],
                    shared=[], dcgm=None, dcgm_error=None, nvbandwidth_testcases=testcases, gpu_resource=_mig.GPU_RESOURCE,
                    no_nodes=None if gpus else "nvidia-smi lists no GPU on the host",
                    imex=dict(nodes=[], claim=None, command=None,
                              skipped="the target is a host: the IMEX probe claims a ComputeDomain channel on a Kubernetes cluster"))
    nodes = []
    for node in view.gpu_nodes():
        labels = node_labels(node)
        nodes.append(dict(name=node_name(node), model=_model(labels), gpus=_gpu_count(node)))
    engine = _catalog.DCGM_HOSTENGINE
    daemonsets = [d for d in view.snapshot["kubernetes"].get("daemonsets") or []
                  if (d.get("metadata") or {}).get("name") == engine["daemonset"]]
    dcgm, error = None, None
    if not daemonsets:
        error = ("the GPU Operator's standalone DCGM host engine (DaemonSet %s) is not running: enable it (ClusterPolicy "
                 "spec.dcgm.enabled: true - role gpu_operator, gpu_operator_values: {dcgm: {enabled: true}}) or leave "
                 "health.dcgm_diag out of validate_checks" % engine["daemonset"])
    else:
        daemonset = daemonsets[0]
        containers = ((daemonset.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        own = next((c.get("image") for c in containers if c.get("name") == engine["container"]), None)
        own = own or (containers[0].get("image") if containers else None)
        dcgm = dict(namespace=daemonset["metadata"].get("namespace"), service=engine["service"], port=engine["port"],
                    image=dcgm_image or own or _catalog.DCGM_IMAGE)
    whole = [n for n in nodes if n["gpus"] > 0]
    return dict(nodes=whole, dcgm=dcgm, dcgm_error=error, shared=sorted(n["name"] for n in nodes if n["gpus"] == 0),
                nvbandwidth_testcases=testcases, gpu_resource=_mig.GPU_RESOURCE,
                no_nodes=None if whole else "no node advertises whole GPUs (%s): nothing to probe" % _mig.GPU_RESOURCE,
                imex=_imex_plan(view.kubernetes("nodes")))


def _imex_plan(nodes):
    """The IMEX channel probe: a pod per Ready clique node that claims a ComputeDomain channel (no GPU) and lists the
    channels it sees; ``skipped`` says why it does not run where no such node exists."""
    cliques = clique_nodes(nodes)
    return dict(nodes=[dict(name=name, model=None, gpus=0) for name in sorted(cliques)], claim=_dra.CHANNEL_CLAIM,
                command=["ls", "-1", _dra.IMEX_CHANNEL_DIR],
                skipped=None if cliques else "not applicable: no Ready node carries the %s label, so no multi-node NVLink "
                                             "domain exists to probe" % _dra.CLIQUE_LABEL)


def _exit_code(pod):
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            return terminated["exitCode"]
    return None


def probe_records(nodes, pods, logs, timeout=None):
    """{node: dict(model, gpus, output, rc, error)} of one probe wave: ``nodes`` the plan's nodes each with the ``pod``
    that ran on it, ``pods`` the probe pods as read after the wait, ``logs`` [dict(pod, log, error)] their logs.

    A pod that did not finish keeps what it logged (a partial output) with the reason; one that was not created or
    whose log could not be read has the error only. The checks decide from these (a partial output is never a pass).
    """
    by_name = dict(((p.get("metadata") or {}).get("name"), p) for p in pods or [])
    logged = dict((entry.get("pod"), entry) for entry in logs or [])
    records = {}
    for node in nodes or []:
        name = node.get("pod")
        pod = by_name.get(name)
        entry = logged.get(name) or {}
        record = dict(model=node.get("model"), gpus=node.get("gpus"), output=entry.get("log") or "", rc=None, error="")
        if node.get("error"):
            record["error"] = "probe pod %s was not created: %s" % (name, _text(node["error"]))
        elif pod is None:
            record["error"] = "probe pod %s is gone (deleted or evicted before its log was read)" % name
        else:
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            record["rc"] = _exit_code(pod)
            if phase not in ("Succeeded", "Failed"):
                record["error"] = "probe pod %s did not finish within %s s (phase %s)" % (name, timeout, phase)
            elif entry.get("error") and not record["output"]:
                record["error"] = "the log of probe pod %s could not be read: %s" % (name, _text(entry["error"]))
        records[node.get("name")] = record
    return records
