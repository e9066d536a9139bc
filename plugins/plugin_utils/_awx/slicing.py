# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Job slicing of the host-level job templates: which playbooks may be sliced, how many slices the instance groups
can run at once, and which slices a launch limit would leave without a host.

AWX/AAP (job_slices, AWX 24.6.1 user guide; AAP 2.6 "controller job slicing"): a template with ``job_slice_count``
N > 1 runs as a workflow of N jobs, each on an even slice of the inventory; the slices should be no more than the
controller/execution nodes that run them; a limit that leaves a slice without a host fails that slice and the whole
job; plays that orchestrate across hosts must not be sliced. Capacity (AAP 2.6 "control and execution nodes"): a
job's impact is its forks + 1, ansible's default forks is 5.

Slices are counted per instance group the template runs on:

- a container group runs each job as a pod: as many at once as its ``max_concurrent_jobs``, else as its
  ``max_forks`` allows jobs of this impact; with neither it is unbounded and the count cannot be sized from it;
- an instance group runs one slice per ready, enabled execution or hybrid node whose capacity takes the job's
  impact, no more than its ``max_concurrent_jobs`` / ``max_forks`` allow when set.

Which slices a limit empties is computed the way AWX cuts the inventory: its hosts in name order, slice k (1-based)
takes every N-th host from the k-th.
"""

from __future__ import annotations

# playbook (path in the project) -> why its plays may be sliced: each play runs on bare-metal GPU hosts, one host at a
# time, nothing shared between hosts. Every other playbook targets clusters or a fabric (one play per cluster that
# creates node pools, networks, operators) and is never sliced.
SLICEABLE_PLAYBOOKS = {
    "playbooks/gpu_hosts.yml": "facts, MIG geometry, MPS and NCCL settings of each bare-metal GPU host, host by host",
    "playbooks/validate.yml": "read-only checks of each GPU host when run with validate_scope=hosts (no cluster play)",
}
# extra variables a sliced template needs so that its playbook runs host plays only
SLICE_EXTRA_VARS = {"playbooks/validate.yml": {"validate_scope": "hosts"}}
DEFAULT_FORKS = 5
READY_NODE_TYPES = ("execution", "hybrid")


def job_impact(forks):
    """A job's capacity impact: its forks (0: ansible's default) + 1."""
    forks = int(forks or 0)
    if forks < 0:
        raise ValueError("forks must be 0 (ansible's default, %d) or more, got %d" % (DEFAULT_FORKS, forks))
    return (forks or DEFAULT_FORKS) + 1


def sliceable_problem(template):
    """Why a template asking for slices must not be sliced ('' when it may)."""
    playbook = template.get("playbook") or ""
    if playbook in SLICEABLE_PLAYBOOKS:
        return ""
    allowed = ", ".join(sorted(SLICEABLE_PLAYBOOKS))
    return ("awx_job_templates_templates: %s: slice is set but %s targets clusters or a fabric, whose plays orchestrate"
            " across hosts (node pools, networks, operators): a slice would run them on part of each cluster. Slice only"
            " host-level playbooks (%s) or remove slice" % (template.get("name"), playbook or "(no playbook)", allowed))


def _group_slots(group, impact):
    """(slots, why) of one instance group for jobs of ``impact``; slots None when it cannot be sized."""
    name = group.get("name")
    max_jobs = int(group.get("max_concurrent_jobs") or 0)
    max_forks = int(group.get("max_forks") or 0)
    limits = []
    if max_jobs > 0:
        limits.append((max_jobs, "max_concurrent_jobs %d" % max_jobs))
    if max_forks > 0:
        limits.append((max_forks // impact, "max_forks %d / impact %d" % (max_forks, impact)))
    if group.get("is_container_group"):
        if not limits:
            return None, ("container group %s sets neither max_concurrent_jobs nor max_forks: it is unbounded, so the"
                          " slices cannot be sized from it; set max_concurrent_jobs (workers x CPU per worker / the pod's"
                          " CPU request)" % name)
        slots, why = min(limits)
        return slots, "container group %s: %d (%s)" % (name, slots, why)
    nodes = [i for i in group.get("instances") or []
             if i.get("enabled", True) and i.get("node_type", "execution") in READY_NODE_TYPES
             and i.get("node_state", "ready") == "ready" and int(i.get("capacity") or 0) >= impact]
    limits.append((len(nodes), "%d ready execution node(s) with capacity >= %d" % (len(nodes), impact)))
    slots, why = min(limits)
    return slots, "instance group %s: %d (%s)" % (name, slots, why)


def slice_count(groups, forks=0, maximum=0):
    """How many slices the instance groups ``groups`` (as the API lists them, each with its ``instances``) run at once
    for jobs of ``forks``, at most ``maximum`` (0: no cap).

    Returns ``{'count': n, 'impact': i, 'why': [line per group], 'problems': [...]}``; ``count`` is 0 with a problem
    when nothing can run a slice.
    """
    impact = job_impact(forks)
    maximum = int(maximum or 0)
    if maximum < 0:
        raise ValueError("maximum must be 0 (no cap) or more, got %d" % maximum)
    if not groups:
        return dict(count=0, impact=impact, why=[], problems=["no instance group to run the slices on"])
    total, why, problems = 0, [], []
    for group in groups:
        slots, line = _group_slots(group, impact)
        if slots is None:
            problems.append(line)
            continue
        total += slots
        why.append(line)
    if problems:
        return dict(count=0, impact=impact, why=why, problems=problems)
    count = min(total, maximum) if maximum else total
    if count == 0:
        problems.append("no node of %s can take a job of impact %d (forks + 1): add execution nodes or lower forks"
                        % (", ".join(g.get("name") or "?" for g in groups), impact))
    elif maximum and total > maximum:
        why.append("capped at %d (awx_job_templates_slice_max)" % maximum)
    return dict(count=count, impact=impact, why=why, problems=problems)


def slices(hosts, count):
    """AWX's cut of ``hosts`` into ``count`` slices: name order, every count-th host from the k-th."""
    ordered = sorted(set(hosts))
    count = min(int(count), len(ordered)) if ordered else 0
    return [ordered[k::count] for k in range(count)]


def limit_problems(hosts, selected, count, template=""):
    """What a launch limit leaving ``selected`` of the inventory's ``hosts`` does to ``count`` slices: one problem
    naming the empty slices, or [] when every slice keeps a host (or nothing is sliced)."""
    count = int(count)
    if count < 1:
        raise ValueError("count must be 1 or more, got %d" % count)
    if count == 1:
        return []
    chosen = set(selected)
    unknown = sorted(chosen - set(hosts))
    if unknown:
        raise ValueError("limited hosts %s are not in the inventory" % ", ".join(unknown[:5]))
    cut = slices(hosts, count)
    empty = [k + 1 for k, part in enumerate(cut) if not chosen.intersection(part)]
    if not empty:
        return []
    shown = ", ".join(str(k) for k in empty[:10]) + (" and %d more" % (len(empty) - 10) if len(empty) > 10 else "")
    return ["%sthe limit keeps %d of %d hosts and leaves %d of the %d slices without a host (slice %s): AWX fails such a"
            " slice and with it the whole job. Launch without a limit, with a limit that keeps a host in every slice"
            " (at least %d hosts spread over the inventory), or run the template's unsliced playbook for a few hosts"
            % ("%s: " % template if template else "", len(chosen), len(set(hosts)), len(empty), len(cut), shown, len(cut))]
