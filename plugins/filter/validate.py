# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation filters: build a snapshot from read-only reads, run the checks on it, render the reports
(engine: plugins/plugin_utils/_validate/).

Documentation: plugins/filter/<filter name>.yml.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import filtered, plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_compare = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.compare")
_report = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.report")
_snapshot = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot")
_suite = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.suite")
_health = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.health")
_merge = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.merge")
_compute_domain = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.compute_domain")

FORMATS = ("ctrf", "junit", "markdown", "counts")


def validate_snapshot(reads, name, kind="kubernetes", gke=None, captured_at=None, mig_parted_config=None):
    """A validation snapshot of one cluster (k8s_info results) or host (the gpu_host fact)."""
    if not name or not isinstance(name, str):
        raise AnsibleFilterError("validate_snapshot: name must be the target's name, got %r" % (name,))
    if kind == "host":
        if not isinstance(reads, dict):
            raise AnsibleFilterError("validate_snapshot: a host snapshot is built from the gpu_host fact (a dict)")
        return _snapshot.build_host(name, plain(reads), captured_at=captured_at)
    if kind != "kubernetes":
        raise AnsibleFilterError("validate_snapshot: kind must be kubernetes or host, got %r" % (kind,))
    if not isinstance(reads, dict):
        raise AnsibleFilterError("validate_snapshot: reads must map %s to k8s_info results" % ", ".join(_snapshot.READ_KEYS))
    unknown = sorted(set(reads) - set(_snapshot.READ_KEYS))
    if unknown:
        raise AnsibleFilterError("validate_snapshot: unknown reads %s; allowed: %s" % (", ".join(unknown), ", ".join(_snapshot.READ_KEYS)))
    if gke is not None and not isinstance(gke, dict):
        raise AnsibleFilterError("validate_snapshot: gke must be a dict (cluster, node_pools, nics) or null")
    if mig_parted_config is not None and not isinstance(mig_parted_config, dict):
        raise AnsibleFilterError("validate_snapshot: mig_parted_config must be a ConfigMap or a mig-parted document (a dict) or null")
    reads = plain(reads)
    return filtered(AnsibleFilterError, "validate_snapshot", _snapshot.build_kubernetes, name,
                    gke=plain(gke) if gke else None, captured_at=captured_at,
                    mig_parted_config=plain(mig_parted_config) if mig_parted_config else None,
                    **dict((k, reads.get(k)) for k in _snapshot.READ_KEYS))


def validate_snapshot_file(document, source="the snapshot file"):
    """A snapshot file's text (or its parsed document) reduced to what the role keeps: no Secret, no env value."""
    if not isinstance(source, str) or not source:
        raise AnsibleFilterError("validate_snapshot_file: source must name where the snapshot came from (a non-empty string)")
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError as exc:
            # the position only: the text itself may be anything, a credential included
            raise AnsibleFilterError("validate_snapshot_file: %s is not JSON (line %d, column %d: %s)"
                                     % (source, exc.lineno, exc.colno, exc.msg)) from None
    if not isinstance(document, dict):
        raise AnsibleFilterError("validate_snapshot_file: %s must hold a snapshot (a mapping), got %s" % (source, type(document).__name__))
    try:
        return _snapshot.loaded(plain(document))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("validate_snapshot_file: %s: %s" % (source, exc)) from None


def validate_results(snapshot, phases=None, checks=None):
    """The checks of ``phases`` (default all but performance) run on a snapshot."""
    if phases is not None and (not isinstance(phases, (list, tuple)) or not all(isinstance(p, str) for p in phases)):
        raise AnsibleFilterError("validate_results: phases must be a list of phase names, got %r" % (phases,))
    if checks is not None and (not isinstance(checks, (list, tuple)) or not all(isinstance(c, str) for c in checks)):
        raise AnsibleFilterError("validate_results: checks must be a list of check ids, got %r" % (checks,))
    return filtered(AnsibleFilterError, "validate_results", _suite.validate, plain(snapshot), phases=phases or None,
                    only=list(checks) if checks else None)


def validate_report(result, format="markdown", start_ms=0, stop_ms=0):
    """One target's validate_results as CTRF JSON, JUnit XML, Markdown or the counts line (text)."""
    if not isinstance(result, dict) or "results" not in result or "target" not in result:
        raise AnsibleFilterError("validate_report: the input must be a validate_results result")
    if format not in FORMATS:
        raise AnsibleFilterError("validate_report: format must be one of %s, got %r" % (", ".join(FORMATS), format))
    result = plain(result)
    if format == "ctrf":
        return json.dumps(_report.ctrf(result["results"], result["target"], int(start_ms), int(stop_ms)), indent=2, sort_keys=True) + "\n"
    if format == "junit":
        return _report.junit(result["results"], result["target"])
    if format == "markdown":
        return _report.markdown(result["results"], result["target"])
    return _report.counts_line(result["summary"])


def validate_merge(reports, format="ctrf", expected=None):
    """One report (CTRF JSON, JUnit XML or Markdown text) of many targets from their CTRF reports (each ``target``,
    ``source`` and ``ctrf``: the file's text, its parsed document, or none when it was not found); ``expected``: the
    targets and counts the slices published (set_stats), or none to merge every report given."""
    if not isinstance(reports, (list, tuple)) or not all(isinstance(r, dict) for r in reports):
        raise AnsibleFilterError("validate_merge: expected a list of reports (dicts with target, source and ctrf)")
    if format not in ("ctrf", "junit", "markdown"):
        raise AnsibleFilterError("validate_merge: format must be one of ctrf, junit, markdown, got %r" % (format,))
    if expected is not None and not isinstance(expected, dict):
        raise AnsibleFilterError("validate_merge: expected must map each target to its counts, got %s" % type(expected).__name__)
    parsed = []
    for report in plain(list(reports)):
        document = report.get("ctrf")
        if isinstance(document, str):
            try:
                document = json.loads(document)
            except ValueError as exc:
                raise AnsibleFilterError("validate_merge: %s is not JSON (line %d: %s)"
                                         % (report.get("source") or report.get("target"), exc.lineno, exc.msg)) from None
        parsed.append(dict(report, ctrf=document))
    merged = filtered(AnsibleFilterError, "validate_merge", _merge.merge, parsed, plain(expected) if expected is not None else None)
    if format == "junit":
        return _merge.junit(merged)
    if format == "markdown":
        return _merge.markdown(merged)
    return json.dumps(merged, indent=2, sort_keys=True) + "\n"


def validate_snapshot_diff(old, new, old_results=None, new_results=None):
    """What changed between two snapshots of one target, and which checks changed verdict (lines)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        raise AnsibleFilterError("validate_snapshot_diff: both snapshots must be mappings (snapshot files read back)")
    return filtered(AnsibleFilterError, "validate_snapshot_diff", _compare.compare, plain(old), plain(new),
                    plain(old_results) if old_results is not None else None, plain(new_results) if new_results is not None else None)


def validate_compute_domain_reads(nodes):
    """The NVIDIA DRA driver's kinds the role lists on a cluster whose Ready nodes carry the NVLink clique label."""
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("validate_compute_domain_reads: the input must be the list of Node objects read, got %s"
                                 % type(nodes).__name__)
    return filtered(AnsibleFilterError, "validate_compute_domain_reads", _compute_domain.dra_reads, plain(nodes))


def validate_compute_domain_daemons(snapshot, logs=None):
    """Without ``logs``: the ComputeDomain daemon pods of a snapshot that are not ready (namespace, pod, node), whose
    logs the role reads. With ``logs`` (the role's registered k8s_log results over that list): the snapshot with the
    lines of those logs that name a known cause."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("target"), dict):
        raise AnsibleFilterError("validate_compute_domain_daemons: the input must be a validation snapshot")
    if logs is None:
        return filtered(AnsibleFilterError, "validate_compute_domain_daemons", _snapshot.compute_domain_daemons, plain(snapshot))
    if not isinstance(logs, (list, tuple)):
        raise AnsibleFilterError("validate_compute_domain_daemons: logs must be a list, got %s" % type(logs).__name__)
    try:
        read = [dict(r["__validate_daemon"], log=r.get("log") or "") for r in plain(logs)]
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("validate_compute_domain_daemons: not the validate role's registered log reads (%s missing)" % exc) from None
    return filtered(AnsibleFilterError, "validate_compute_domain_daemons", _snapshot.with_daemon_logs, plain(snapshot), read)


def validate_health_plan(snapshot, dcgm_image=None):
    """The nodes the health probes run on and the DCGM host engine they connect to, from a snapshot."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("target"), dict):
        raise AnsibleFilterError("validate_health_plan: the input must be a validation snapshot")
    if dcgm_image is not None and not isinstance(dcgm_image, str):
        raise AnsibleFilterError("validate_health_plan: dcgm_image must be an image reference (text), got %r" % (dcgm_image,))
    return filtered(AnsibleFilterError, "validate_health_plan", _health.probe_plan, plain(snapshot), dcgm_image=dcgm_image or None)


def validate_health_records(created, pods, logs, pod_prefix, timeout=None):
    """One health probe wave's record per node (output, exit code, error) from the validate role's registered results:
    its pod creations (loop over the plan's nodes), the pods read after the wait, and their log reads."""
    for name, value in (("created", created), ("pods", pods), ("logs", logs)):
        if not isinstance(value, (list, tuple)):
            raise AnsibleFilterError("validate_health_records: %s must be a list, got %s" % (name, type(value).__name__))
    created, logs = plain(created), plain(logs)
    try:
        # the role registers these with failed_when: false (a failure is a node's error, not the play's), so a failed
        # call is one without its result: the created object, the log
        nodes = [dict(r["__validate_health_node"], pod="%s-%d" % (pod_prefix, r["__validate_health_index"]),
                      error=None if r.get("result") else (r.get("msg") or "the pod could not be created")) for r in created]
        logged = [dict(pod=r["__validate_health_pod"]["metadata"]["name"], log=r.get("log") or "",
                       error=None if "log" in r else (r.get("msg") or "the log could not be read")) for r in logs]
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("validate_health_records: not the validate role's registered probe results (%s missing)" % exc) from None
    return filtered(AnsibleFilterError, "validate_health_records", _health.probe_records, nodes, plain(pods), logged, timeout=timeout)


class FilterModule:
    """Validation filters."""

    def filters(self):
        return {
            "validate_snapshot": validate_snapshot,
            "validate_results": validate_results,
            "validate_report": validate_report,
            "validate_merge": validate_merge,
            "validate_snapshot_diff": validate_snapshot_diff,
            "validate_snapshot_file": validate_snapshot_file,
            "validate_health_plan": validate_health_plan,
            "validate_compute_domain_daemons": validate_compute_domain_daemons,
            "validate_compute_domain_reads": validate_compute_domain_reads,
            "validate_health_records": validate_health_records,
        }
