# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPU Operator upgrade (filters ``gpu_operator_upgrade_plan``, ``gpu_operator_upgrade_progress`` and
``gpu_operator_upgrade_report``; playbook gpu_operator_upgrade.yml through role gpu_operator's ``upgrade`` entry point).

- ``upgrade_plan``: from the installed release (kubernetes.core.helm_info) to the target chart's install plan
  (``gpu_operator_plan`` at the target version): every refusal at once (no release, another chart, a release helm has
  not finished, a downgrade, CRDs that are not the target chart's, a bad ``driver.upgradePolicy``), the CRDs to apply
  first (helm installs a chart's ``crds/`` but never upgrades them), the values with ``driver.upgradePolicy`` set
  explicitly and the chart's CRD hook off (it needs a helm flag kubernetes.core.helm does not pass), and what the watch
  needs. An installed release already at the target is not upgraded again: the plan then only watches and judges.
- ``upgrade_progress``: one poll of the driver rollout - each driver node's ``nvidia.com/gpu-driver-upgrade-state``,
  how long it has been there (from the previous poll), whether its driver pod runs the target driver; done, in
  progress, failed, stuck past the per-node timeout, or skipped by its skip label.
- ``upgrade_report``: the stuck and failed nodes with the line of their driver pod's log that says why.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpu_operator import (
    DRIVER_CONTAINER, DRIVER_DEPLOY_LABEL, DRIVER_UPGRADE_DONE, DRIVER_UPGRADE_FAILED,
    DRIVER_UPGRADE_POLICY, DRIVER_UPGRADE_SKIP_LABEL, DRIVER_UPGRADE_STATE_LABEL, DRIVER_UPGRADE_STATES, GPU_OPERATOR_CHART,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import scrub
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.gpu_operator_plan import gpu_operator_chart
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import OperatorInputError

CRD_GROUP = "nvidia.com"
_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%\Z")


# --------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------

def _version(text):
    match = re.match(r"^v?(\d+)\.(\d+)\.(\d+)\Z", str(text or "").strip())
    return tuple(int(p) for p in match.groups()) if match else None


def installed_version(release):
    """The chart version of a helm_info ``status`` (chart ``gpu-operator-v25.10.1``), or None."""
    chart = str((release or {}).get("chart") or "")
    prefix = GPU_OPERATOR_CHART + "-"
    return chart[len(prefix):] if chart.startswith(prefix) else None


def _policy_value(option, kind, value, problems):
    if kind == "bool":
        if not isinstance(value, bool):
            problems.append("%s must be true or false, got %r" % (option, value))
    elif kind == "count":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append("%s must be a whole number >= 0, got %r" % (option, value))
    elif kind == "count_or_percent":
        if not ((isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (isinstance(value, str) and _PERCENT.match(value))):
            problems.append("%s must be a whole number >= 0 or a percentage such as 25%%, got %r" % (option, value))
    elif not isinstance(value, str):
        problems.append("%s must be text (a label selector), got %r" % (option, value))
    return value


def upgrade_policy(policy, problems, table=None, prefix="upgrade_policy"):
    """The chart's ``driver.upgradePolicy`` from the role's option (snake_case keys of the catalog table)."""
    table = DRIVER_UPGRADE_POLICY if table is None else table
    if not isinstance(policy, dict):
        problems.append("%s must be a mapping (%s), got %r" % (prefix, ", ".join(table), policy))
        return {}
    values = {}
    for key, value in policy.items():
        if key not in table:
            problems.append("%s.%s is not a setting (allowed: %s)" % (prefix, key, ", ".join(table)))
            continue
        if value is None:
            continue
        chart_key, kind = table[key]
        if isinstance(kind, dict):
            values[chart_key] = upgrade_policy(value, problems, kind, "%s.%s" % (prefix, key))
        else:
            values[chart_key] = _policy_value("%s.%s" % (prefix, key), kind, value, problems)
    return values


def _crd_problems(crds):
    problems = []
    if not crds:
        return ["crds: no CustomResourceDefinition given: the chart's crds/ folder at the target version is applied before "
                "the upgrade (helm never upgrades CRDs): set gpu_operator_upgrade_crds_dir to it (helm pull nvidia/gpu-operator "
                "--version <target> --untar)"]
    for index, doc in enumerate(crds):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        group = ((doc.get("spec") or {}).get("group") if isinstance(doc, dict) else None)
        if kind != "CustomResourceDefinition" or group != CRD_GROUP:
            problems.append("crds[%d] is not a %s CustomResourceDefinition (kind %s, group %s): the folder must be the GPU Operator "
                            "chart's crds/" % (index, CRD_GROUP, kind, group))
    return problems


def upgrade_plan(install_plan, installed, options):
    """The upgrade plan; OperatorInputError listing every refusal. ``install_plan``: gpu_operator_plan at the target
    version; ``installed``: helm_info's ``status`` (empty or None without a release); ``options``: upgrade_policy,
    crds (documents), node_timeout, allow_downgrade, render (render mode: no release was read, the CRDs may be
    unknown), refusals (problems the caller found before, such as the failing checks of the validation before,
    refused with the plan's own)."""
    options = dict(options or {})
    chart = dict(install_plan["chart"])
    target = chart["chart_version"]
    problems = []
    installed = installed or {}
    current = installed_version(installed)
    render = bool(options.get("render"))
    if render:
        pass     # render mode reads nothing: the release is judged when the plan runs against the cluster
    elif not installed:
        problems.append("no release %s in namespace %s: install the GPU Operator first (playbooks/gpu_operator.yml)"
                        % (chart["release_name"], chart["release_namespace"]))
    elif current is None:
        problems.append("release %s in %s is chart %s, not %s" % (chart["release_name"], chart["release_namespace"],
                                                                  installed.get("chart"), GPU_OPERATOR_CHART))
    elif installed.get("status") != "deployed":
        problems.append("release %s is %s, not deployed: an earlier helm operation did not finish; finish or roll it back "
                        "(helm history / helm rollback) before upgrading" % (chart["release_name"], installed.get("status")))
    elif _version(current) is None:
        problems.append("release %s: installed chart version %r is not a release version" % (chart["release_name"], current))
    elif _version(current) > _version(target) and not options.get("allow_downgrade"):
        problems.append("chart_version %s is older than the installed %s: the GPU Operator does not support downgrades" % (target, current))
    policy = upgrade_policy(options.get("upgrade_policy") or {}, problems)
    crds = list(options.get("crds") or [])
    if crds or not render:
        problems += _crd_problems(crds)
    timeout = options.get("node_timeout")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        problems.append("node_timeout must be a whole number of seconds >= 1, got %r" % (timeout,))
    refusals = options.get("refusals") or []
    if not isinstance(refusals, list):
        problems.append("refusals must be a list of problems found before the upgrade, got %r" % (refusals,))
    else:
        problems += [str(r) for r in refusals]
    if problems:
        raise OperatorInputError("; ".join(problems))
    values = dict(chart.get("values") or {})
    driver = dict(values.get("driver") or {})
    driver_on = bool(driver.get("enabled"))
    if driver_on:
        driver["upgradePolicy"] = policy
        values["driver"] = driver
    # the CRDs are applied by the plan (crds); the chart's own pre-upgrade hook needs --disable-openapi-validation
    values["operator"] = dict(values.get("operator") or {}, upgradeCRD=False)
    chart["values"] = values
    dummy, entry = gpu_operator_chart(target)
    expected_driver = str(driver.get("version") or entry["driver_version"])
    action = "none" if current == target else "upgrade"
    names = sorted((d.get("metadata") or {}).get("name") or "?" for d in crds) or [
        "the crds/ folder of chart %s (render mode pulls no chart)" % target]
    steps = ["release %s in %s: chart %s -> %s" % (chart["release_name"], chart["release_namespace"],
                                                   current or "(not read in render mode)", target)
             if action == "upgrade" else "release %s in %s: already chart %s, not upgraded again" % (
                 chart["release_name"], chart["release_namespace"], target),
             "CRDs first (helm never upgrades them): %s" % ", ".join(names)]
    if driver_on:
        steps.append("driver.upgradePolicy: %s" % _show(policy))
        steps.append("watch %s on the driver nodes (driver %s), %d s per node; nodes labelled %s=true are skipped"
                     % (DRIVER_UPGRADE_STATE_LABEL, expected_driver, timeout, DRIVER_UPGRADE_SKIP_LABEL))
    else:
        steps.append("the driver is not the operator's here (driver.enabled false): no driver rollout to watch")
    return dict(action=action, from_version=current, to_version=target, chart=chart, crds=crds, steps=steps,
                watch=dict(enabled=driver_on, namespace=chart["release_namespace"], driver_version=expected_driver,
                           precompiled=bool(driver.get("usePrecompiled")), node_timeout=timeout,
                           driver_selector=install_plan["names"]["driver_selector"],
                           state_label=DRIVER_UPGRADE_STATE_LABEL, skip_label=DRIVER_UPGRADE_SKIP_LABEL))


def _show(value):
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _show(v)) for k, v in sorted(value.items()))
    return str(value).lower() if isinstance(value, bool) else str(value)


# --------------------------------------------------------------------------------------------
# The watch
# --------------------------------------------------------------------------------------------

def _ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _driver_image(pod):
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == DRIVER_CONTAINER:
            return container.get("image") or ""
    return ""


def runs_target(image, watch):
    """Whether a driver image is the target driver: its tag starts with the version (``580.126.20-ubuntu22.04``), or
    for precompiled drivers with the branch (``580-6.8.0-60-generic-ubuntu24.04``)."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    version = str(watch["driver_version"])
    if watch.get("precompiled"):
        return tag.startswith(version.split(".", maxsplit=1)[0] + "-")
    return tag == version or tag.startswith(version + "-")


def _log_source(pod):
    """(container, why) whose log says why the pod is held: the first init container that has not ended well, else
    the driver container when it is not ready."""
    statuses = dict((s.get("name"), s) for s in (pod.get("status") or {}).get("initContainerStatuses") or [] if isinstance(s, dict))
    for container in (pod.get("spec") or {}).get("initContainers") or []:
        state = (statuses.get(container.get("name")) or {}).get("state") or {}
        ended = state.get("terminated") or {}
        if not (ended and ended.get("exitCode") == 0):
            reason = (state.get("waiting") or {}).get("reason") or ended.get("reason") or ("running" if "running" in state else "not started")
            return container.get("name"), reason
    return DRIVER_CONTAINER, "not ready" if not _ready(pod) else "ready"


def _node_row(node, pods, watch, before, now):
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    state = labels.get(watch["state_label"], "")
    if state and state not in DRIVER_UPGRADE_STATES:
        raise ValueError("node %s: unknown %s %r (known: %s)" % (meta.get("name"), watch["state_label"], state, ", ".join(DRIVER_UPGRADE_STATES)))
    mine = [p for p in pods if (p.get("spec") or {}).get("nodeName") == meta.get("name")]
    pod = mine[0] if mine else None
    image = _driver_image(pod) if pod else ""
    since = before["since"] if before and before.get("state") == state else now
    row = dict(state=state, since=since, seconds=int(now - since), pod=(pod.get("metadata") or {}).get("name") if pod else None,
               image=image, log_container=None, held=None)
    if labels.get(watch["skip_label"]) == "true":
        row["status"] = "skipped"
    elif state == DRIVER_UPGRADE_FAILED:
        row["status"] = "failed"
    elif state == DRIVER_UPGRADE_DONE and pod and runs_target(image, watch) and _ready(pod):
        row["status"] = "done"
    elif now - since > watch["node_timeout"]:
        row["status"] = "stuck"
    else:
        row["status"] = "upgrading"
    if row["status"] in ("failed", "stuck") and pod:
        row["log_container"], row["held"] = _log_source(pod)
    return row


def upgrade_progress(nodes, pods, watch, previous=None, now=0):
    """One poll: {nodes: {name: row}, lines (what moved since ``previous``), finished, ok, counts, moved (a node changed
    state, or one upgrading since ``previous`` ran past its timeout; the watch waits for that between two full polls),
    settled (every node done, failed, stuck, skipped or in upgrade-done: what the watch's last wait waits for)}. ``nodes``: Node
    documents; ``pods``: the driver pods; ``previous``: the last poll's result (or None); ``now``: epoch seconds."""
    before = ((previous or {}).get("nodes") or {})
    rows, lines = {}, []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(DRIVER_DEPLOY_LABEL) != "true" and watch["state_label"] not in labels:
            continue
        name = meta.get("name")
        row = _node_row(node, pods, watch, before.get(name), now)
        rows[name] = row
        old = before.get(name)
        if old is None:
            lines.append("node %s: %s (%s)" % (name, row["state"] or "not processed yet", row["status"]))
        elif old.get("state") != row["state"]:
            was = old.get("state") or "not processed yet"
            lines.append("node %s: %s -> %s (%s, %d s in %s)" % (
                name, was, row["state"] or "not processed yet", row["status"], int(now - old.get("since", now)), old.get("state") or "-"))
        elif old.get("status") != row["status"]:
            lines.append("node %s: %s in %s (%d s)" % (name, row["status"], row["state"] or "no upgrade state", row["seconds"]))
    counts = dict((s, sorted(n for n, r in rows.items() if r["status"] == s)) for s in ("done", "upgrading", "stuck", "failed", "skipped"))
    finished = not counts["upgrading"]
    # what a wait between two full polls ends on: a node changed state, or one still upgrading ran past its timeout
    moved = previous is None or set(rows) != set(before) or any(
        row["state"] != before[name].get("state") or (row["status"] == "stuck" and before[name].get("status") == "upgrading")
        for name, row in rows.items() if name in before)
    # read from the nodes alone (the wait between two full polls has no pods): every node at an end of the rollout
    settled = all(r["status"] != "upgrading" or r["state"] == DRIVER_UPGRADE_DONE for r in rows.values())
    return dict(nodes=rows, lines=lines, finished=finished, moved=moved, settled=settled, ok=finished and not counts["stuck"] and not counts["failed"],
                counts=counts, summary="%d driver nodes: %s" % (len(rows), ", ".join(
                    "%d %s" % (len(v), k) for k, v in counts.items() if v) or "none"))


_WHY = re.compile(r"(?i)(error|fail|could not|cannot|unable|timed? ?out|in use|refus|denied|not found|no such)")


def why_line(log):
    """The last line of a log that says what went wrong (an error word), else its last non-empty line."""
    lines = [" ".join(line.split()) for line in str(log or "").splitlines() if line.strip()]
    chosen = [line for line in lines if _WHY.search(line)]
    return scrub((chosen or lines or [""])[-1])[:300]


def upgrade_report(progress, logs=None):
    """One line per stuck or failed node (its state, time there, the held container and its log's line that says why),
    one per node still upgrading when the watch ended, and one per skipped node; ``logs``: {node: log text} of the containers named in the progress rows."""
    logs = logs or {}
    lines = []
    for name, row in sorted(progress["nodes"].items()):
        if row["status"] == "skipped":
            lines.append("node %s skipped: labelled %s=true (its driver is not upgraded)" % (name, DRIVER_UPGRADE_SKIP_LABEL))
        elif row["status"] == "upgrading":
            lines.append("node %s still in %s after the watch ended (%d s there): raise gpu_operator_upgrade_timeout or run again "
                         "to go on watching" % (name, row["state"] or "no upgrade state", row["seconds"]))
        elif row["status"] in ("stuck", "failed"):
            where = ("driver pod %s, container %s (%s)" % (row["pod"], row["log_container"], row["held"])) if row["pod"] else "no driver pod on the node"
            why = why_line(logs.get(name)) if row["pod"] else ""
            lines.append("node %s %s in %s for %d s: %s%s" % (
                name, "failed" if row["status"] == "failed" else "stuck", row["state"] or "no upgrade state", row["seconds"], where,
                (": " + why) if why else ": (no log line)" if row["pod"] else ""))
    return lines
