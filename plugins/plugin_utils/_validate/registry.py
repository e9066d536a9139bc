# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The validation checks' registry and runner: every check has a stable id, a phase, what it reads from a
snapshot, the cause of its failure in one sentence and the fix; running them gives one result per check.

A check is a pure function of a snapshot (``_validate/snapshot.py`` reads it). Its result is ``passed``,
``failed`` (with the cause, the fix and the evidence), ``skipped`` (with the reason: only when what it
checks is absent from a snapshot that was read) or ``other``: the check raised, or a document it needs was
not captured. ``other`` is never a pass; ``summary`` counts it and ``exit_status`` fails on it.
"""

from __future__ import annotations

import os
import time

import yaml

PHASES = ("preflight", "deployment", "conformance", "health", "performance")
# the phases that run probe workloads: only when asked for
OPT_IN_PHASES = ("health", "performance")
STATUSES = ("passed", "failed", "skipped", "other")


class Missing(Exception):
    """A snapshot path the check needs was not captured (or was captured as a failed read)."""

    def __init__(self, path, why=None):
        Exception.__init__(self, path)
        self.path = path
        self.why = why


class Fault(str):
    """A problem whose fix is one of the check's ``fixes`` (by name) rather than its own ``fix``: one check can find
    faults that different steps repair (a DaemonSet that is missing, against one that runs the wrong release)."""

    def __new__(cls, text, fix):
        fault = str.__new__(cls, text)
        fault.fix = fix
        return fault


class Skip(Exception):
    """The check does not apply to this snapshot; the message says why (from what was read)."""


class Check(object):
    """One check: ``function(view)`` returns (evidence, problems): lists of text; problems empty means passed."""

    def __init__(self, check_id, phase, title, reads, cause, fix, function, fixes=None):
        if phase not in PHASES:
            raise ValueError("check %s: unknown phase %r" % (check_id, phase))
        for one in [fix] + list((fixes or {}).values()):
            if not (isinstance(one, dict) and (one.get("role") and one.get("variable") or one.get("manual"))):
                raise ValueError("check %s: the fix names a role and its variable, or a manual step" % check_id)
        self.id = check_id
        self.phase = phase
        self.title = title
        self.reads = tuple(reads)
        self.cause = cause
        self.fix = dict(fix)
        self.fixes = dict((name, dict(one)) for name, one in (fixes or {}).items())
        self.function = function

    def describe(self):
        """The check as the docs list it (its other fixes after its own, each after the fault it repairs)."""
        text = fix_text(self.fix)
        for name, one in sorted(self.fixes.items()):
            text += "; %s: %s" % (name.replace("_", " "), fix_text(one))
        return dict(id=self.id, phase=self.phase, title=self.title, reads=list(self.reads), cause=self.cause, fix=text)

    def fix_of(self, problems):
        """The fix of ``problems``: each distinct fix their faults name, in order (the check's own for a plain one)."""
        texts = []
        for problem in problems:
            name = getattr(problem, "fix", None)
            if name is not None and name not in self.fixes:
                raise ValueError("check %s: a fault names fix %r, which its description lacks" % (self.id, name))
            text = fix_text(self.fixes[name] if name is not None else self.fix)
            if text not in texts:
                texts.append(text)
        return "; ".join(texts)

    def other_fix(self, exc):
        """What lets the check run when it could not (``exc``: Missing, or what it raised)."""
        leave_out = "or leave %s out of validate_checks (list the checks to run)" % self.id
        path = getattr(exc, "path", None)
        if path is None:
            return "report the error with the snapshot (validate_write_snapshot); " + leave_out
        if path.startswith("gke."):
            return ("set validate_gke (cluster and location; the project and GCP credentials through the play's module_defaults "
                    "of group/gpu_ops.cluster.gcp, or validate_gke.project) so the GKE API is read; " + leave_out)
        if path.startswith("mig_parted"):
            return "give the MIG manager's mig-parted ConfigMap as validate_mig_parted_config; " + leave_out
        if path.startswith("health"):
            return ("do what the message names for each node (a floor for its GPU model: validate_health_nvbandwidth_floors, "
                    "validate_health_nccl_loopback_floors; a probe that runs to the end: validate_health_timeout, "
                    "validate_health_probe_image, the DCGM host engine) and run the health phase again (validate_phases health); "
                    + leave_out)
        if path.startswith("performance"):
            return "run the performance probes again (validate_phases performance, validate_performance_probes); " + leave_out
        if path.startswith("kubernetes.") and "[" not in path:
            return ("make the read work (the kubeconfig's API server reachable, list rights on the kind: the message says "
                    "why it failed); " + leave_out)
        return "the snapshot lacks %s: read the cluster again with a kubeconfig that can list it; %s" % (path, leave_out)


def probe_record(phase, records, key):
    """The record ``key`` of a probe phase's output (``records``: the snapshot's ``health`` or ``performance``):
    Missing when none was captured or the probe could not run, Skip with the probe's reason when it was not run."""
    record = records.get(key)
    if record is None:
        raise Missing("%s.%s" % (phase, key), "no probe output was captured")
    if record.get("skipped"):
        raise Skip(record["skipped"])
    if record.get("error"):
        raise Missing("%s.%s" % (phase, key), "the probe could not run: %s" % " ".join(str(record["error"]).split())[:300])
    return record


def fix_text(fix):
    """``role gpu_operator, variable gpu_operator_mig`` or the manual step."""
    if fix.get("role"):
        text = "role gpu_ops.cluster.%s, variable %s" % (fix["role"], fix["variable"])
        return text + (": " + fix["manual"] if fix.get("manual") else "")
    return fix["manual"]


CHECKS = []


def register(check_id, phase, title, reads, cause, fix, fixes=None):
    """Decorator: add a check function to the registry under a stable, unique id."""
    def wrap(function):
        if any(c.id == check_id for c in CHECKS):
            raise ValueError("duplicate check id %s" % check_id)
        CHECKS.append(Check(check_id, phase, title, reads, cause, fix, function, fixes))
        return function
    return wrap


DESCRIPTION_KEYS = ("phase", "title", "reads", "cause", "fix")
# optional: {name: fix} of the faults (registry.Fault) that another step repairs than the check's own fix
OPTIONAL_KEYS = ("fixes",)


def described_by(path):
    """The decorator of the checks of the file ``path``: ``@described(check_id)`` registers a check function with the
    phase, title, reads, cause and fix that the YAML file beside it (``gke.yml`` for ``gke.py``) gives ``check_id``.

    The checks' prose is one table per file that the docs are generated from; the file itself holds their logic.
    """
    table_path = os.path.splitext(path)[0] + ".yml"
    name = os.path.basename(table_path)
    with open(table_path, encoding="utf-8") as handle:
        table = yaml.safe_load(handle) or {}

    def described(check_id):
        entry = table.get(check_id)
        if not isinstance(entry, dict):
            raise ValueError("check %s has no description in %s" % (check_id, name))
        if sorted(set(entry) - set(OPTIONAL_KEYS)) != sorted(DESCRIPTION_KEYS):
            raise ValueError("check %s: its description in %s has %s; a description has %s (and optionally %s)" % (
                check_id, name, ", ".join(sorted(entry)), ", ".join(DESCRIPTION_KEYS), ", ".join(OPTIONAL_KEYS)))
        return register(check_id, *[entry[key] for key in DESCRIPTION_KEYS], fixes=entry.get("fixes"))
    return described


def by_id(check_id):
    for one in CHECKS:
        if one.id == check_id:
            return one
    raise KeyError(check_id)


def _result(check, status, started, evidence=(), message=None, cause=None, fix=None):
    result = dict(id=check.id, phase=check.phase, title=check.title, status=status, reads=list(check.reads),
                  evidence=list(evidence), message=message, duration_ms=int(round((time.time() - started) * 1000)))
    if status == "failed":
        result.update(cause=cause, fix=fix)
    elif status == "other":
        result.update(fix=fix)
    return result


def run_check(check, view):
    """One check against a snapshot view; never raises."""
    started = time.time()
    view.touched = set()
    try:
        evidence, problems = check.function(view)
    except Skip as exc:
        return _result(check, "skipped", started, message="skipped: %s" % exc)
    except Missing as exc:
        return _result(check, "other", started, message="cannot read %s%s: the check could not run" % (
            exc.path, " (%s)" % exc.why if exc.why else ""), fix=check.other_fix(exc))
    except Exception as exc:  # a crashing check is reported as other, never as a pass
        return _result(check, "other", started, message="the check raised %s: %s" % (type(exc).__name__, exc),
                       fix=check.other_fix(exc))
    if problems:
        try:
            fix = check.fix_of(problems)
        except ValueError as exc:
            return _result(check, "other", started, message="the check raised ValueError: %s" % exc, fix=check.other_fix(exc))
        return _result(check, "failed", started, evidence, message="; ".join(problems), cause=check.cause, fix=fix)
    return _result(check, "passed", started, evidence)


def run_checks(view, phases=None, checks=None):
    """Results of the registered checks (optionally only ``phases`` / the ids ``checks``), in registry order."""
    phases = tuple(phases or [p for p in PHASES if p not in OPT_IN_PHASES])
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        raise ValueError("unknown phase(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(PHASES)))
    chosen = [c for c in CHECKS if c.phase in phases and (checks is None or c.id in checks)]
    if checks is not None:
        missing = sorted(set(checks) - set(c.id for c in CHECKS))
        if missing:
            raise ValueError("unknown check id(s) %s" % ", ".join(missing))
    return [run_check(c, view) for c in chosen]


def summary(results):
    """Counts by status plus ``tests``; ``ok`` is false when anything failed or ended as other."""
    counts = dict((s, sum(1 for r in results if r["status"] == s)) for s in STATUSES)
    counts["tests"] = len(results)
    counts["ok"] = counts["failed"] == 0 and counts["other"] == 0
    return counts


def exit_status(results):
    """0 when nothing failed and nothing ended as other, 8 when a check failed, 9 when one could not run."""
    counts = summary(results)
    if counts["failed"]:
        return 8
    if counts["other"]:
        return 9
    return 0
