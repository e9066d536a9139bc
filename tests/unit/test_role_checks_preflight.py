# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every value check a role makes is reached by the role's preflight (roles/preflight, each role's tasks/preflight.yml).

The checks are found by reading the roles' task files: every ``assert`` and ``fail`` task, and every task that calls a
problem filter (``gpu_ops.cluster.*_problems``). A check is reached when the preflight runs the same definition:

- the check sits in the tasks file the preflight runs itself (``preflight_tasks``), or
- what the check tests is a variable of the role's ``vars/main.yml`` (or a fact that ``preflight_tasks`` file sets),
  not one of the task's own ``vars``, and the role's preflight reads that variable, directly or through the other
  variables of ``vars/main.yml``.

What a check can only judge with the cluster's state or with what an earlier step of the role returned is listed
below with the reason; the test fails when an entry there is not (or no longer) such a check.
"""

from __future__ import annotations

import glob
import os
import re

import yaml

# the same walk over tasks, blocks, rescues and always sections as the include test
from ansible_collections.gpu_ops.cluster.tests.unit.test_role_includes import _tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK_ACTIONS = ("ansible.builtin.assert", "ansible.builtin.fail", "assert", "fail")
PROBLEM_FILTER = re.compile(r"gpu_ops\.cluster\.[a-z0-9_]+_problems\b")
IMPORT_ROLE = ("ansible.builtin.import_role", "import_role")
NAME = re.compile(r"\b__[a-z0-9_]+\b")
TASKS_FILE = re.compile(r"[A-Za-z0-9_]+\.yml")
NOT_TASK_KEYS = ("name", "block", "rescue", "always")

# Roles whose checks no preflight can reach, and why.
ROLES_WITHOUT_PREFLIGHT = {
    "render_notice": "its checks (the inventory's hosts, the render folder) are the first play of every playbook, which "
                     "runs before the preflight play and changes nothing but the render folder it checks",
    "apply": "the steps of the other roles: it judges the manifests and charts the calling role built at its turn; the "
             "options these come from (steps, names, timeouts) are in the calling roles' own checks, which their "
             "preflights run",
}

# (role, tasks file, task name): why the preflight cannot judge it - it needs the cluster's state, or what an earlier
# step of the play or of the role returned.
CLUSTER_STATE = {
    ("awx_job_templates", "main.yml", "Refuse a slice count the instance groups cannot give"):
        "the capacity of the instance groups the controller holds (read by the role before its first write; the preflight "
        "contacts no controller)",
    ("awx_job_templates", "slice_preflight.yml", "Refuse a limit that leaves a slice without a host"):
        "the inventory and the launch limit AWX hands the workflow's first node (this entry point is the sliced job's preflight)",
    ("validate", "merge.yml", "Refuse a merge with nothing to merge"):
        "the reports the slices wrote to the shared folder and the targets they published",
    ("validate", "merge.yml", "Merged counts"):
        "the results of the checks the slices ran",
    ("dra_driver", "_verify.yml", "Report what is missing, node by node"):
        "what the release the role has just installed publishes (controller, kubelet plugins, ResourceSlices, labels)",
    ("gpu_operator", "upgrade.yml", "Fail when a driver node did not finish its upgrade"):
        "the driver rollout the upgrade has just started: the nodes' upgrade states and driver pods",
    ("mps", "_host_present.yml", "Check that the MPS control daemon answers"):
        "the answer of the daemon the role has just started on the host",
    ("validate", "_report.yml", "Counts of {{ __validate_result.target }}"):
        "the results of the checks on what was read from the target",
    ("awx_job_templates", "main.yml", "Refuse a setup that AWX holds under another organization"):
        "the objects the controller holds under the setup's names (read by the role before its first write; the preflight "
        "contacts no controller, and the role is the playbook's only writer)",
    ("gcp_gpu_vpcs", "await.yml", "Check the background job of the fabric"):
        "the job the main entry point started in the background (gcp_gpu_vpcs_fabric_job), earlier in the play",
    ("gcp_gpu_vpcs", "objects.yml", "Check that the fabric is known"):
        "the fabric the main entry point converged (gcp_gpu_vpcs_fabric), earlier in the play",
    ("gke_gpu_cluster", "_fabric_check.yml", "Check that the fabric has the profile's node networks"):
        "the fabric the gcp_gpu_vpcs role converged (or its background job returned), earlier in the play",
    ("gke_gpu_cluster", "_verify.yml", "Fail on GPU nodes that do not report every GPU"):
        "the GPU nodes of the new node pool",
    ("gke_gpu_cluster", "main.yml", "Fail with the cluster's error and what the fabric left"):
        "a cluster request the cloud refused (its inputs passed the preflight: validate_only of gke_cluster)",
    ("gpu_operator", "_driver_pods.yml", "Check every driver pod for the sidecars and their load messages"):
        "the driver pods the GPU Operator started",
    ("gpu_operator", "_vectoradd.yml", "Check that the vector-add test passed"):
        "the vector-add pod's result",
    ("gpu_operator", "_verify.yml",
     "Wait until the GPU nodes are labelled and advertise their GPUs - {{ __gpu_operator_gpu_hosts.nodes.values() | sort | join(', ') }}"):
        "the GPU nodes' labels and allocatable GPUs",
    ("gpu_operator", "_verify.yml", "Report the nodes that are not as expected"):
        "the GPU nodes' labels and allocatable GPUs",
    ("gpu_operator", "_wait.yml", "Fail naming what is not ready"):
        "the readiness of the ClusterPolicy and the operator's pods",
    ("mig_manager", "main.yml", "Check that every named node exists and something was found"):
        "the nodes of the cluster",
    ("mig_manager", "main.yml", "Check the config against the MIG manager's mig-parted config and the GPUs"):
        "the MIG manager's ConfigMaps and the nodes' GPUs on the cluster",
    ("mig_manager", "main.yml", "Check that no node failed"):
        "the nodes' MIG config state labels after the change",
    ("mig_manager", "main.yml", "Report the nodes the MIG manager did not configure"):
        "the nodes' MIG config state labels and events after the change",
    ("mps", "_ack_drain.yml", "Refuse while GPU pods run on the nodes"):
        "the GPU pods running on the nodes",
    ("mps", "_ack_verify.yml", "Report the nodes without a daemon"):
        "the MPS control daemon pods ACK started",
    ("mps", "_ack_verify.yml", "Fail on the findings"):
        "the workloads on the cluster",
    ("mps", "_gpudirect_check.yml", "Refuse nodes whose GPUDirect fabric does not combine with MPS"):
        "the GPU nodes' machine types",
    ("mps", "ack.yml", "Check that every named node exists and something was found"):
        "the nodes of the cluster",
    ("nccl_test", "main.yml", "Check that there is a GPU node for every test pod"):
        "the GPU nodes of the cluster",
    ("nccl_test", "main.yml", "Check that every GPU NIC Network exists and is Ready"):
        "the Network objects of the cluster",
    ("nccl_test", "verdict.yml", "Fail below the threshold, with the table"):
        "the output of the test run",
    ("network_operator", "_install.yml", "Refuse a chart that helm would refuse on this version"):
        "the cluster's Kubernetes version",
    ("network_operator", "_wait.yml", "Fail naming what is not ready"):
        "the readiness of the NicClusterPolicy and the networks",
    ("nvidia_device_plugin", "_verify_nodes.yml", "Report a failure to read the nodes"):
        "the GPU pool's nodes",
    ("nvidia_device_plugin", "_verify_nodes.yml", "Report the nodes that do not match"):
        "the GPU pool's nodes",
    ("rdma_test", "_run.yml", "Check that the server is on the secondary network"):
        "the address Multus gave the server pod",
    ("rdma_test", "_verdict.yml", "Fail below the threshold, with the table"):
        "the output of the test run",
}

# Pure checks of the two cloud roles that still run at their role's turn only; they move into the preflight with the
# cloud modules' own checks (another change of the same work). The test fails once one is reached: then remove it here.
NOT_YET = {
    ("gke_gpu_cluster", "_kubeconfig.yml", "Check that the plugin is where the kubeconfig will look for it"),
}


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _text(value):
    """Every string of ``value`` (a task without its nested tasks, a vars document), joined."""
    if isinstance(value, dict):
        return " ".join(_text(v) for k, v in value.items() if k not in ("block", "rescue", "always"))
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return value if isinstance(value, str) else ""


def _action(task):
    return next((key for key in CHECK_ACTIONS if key in task), None)


def checks(role):
    """``(tasks file, task name, names the check tests, names the task defines itself)`` of every value check of a role."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
        if os.path.basename(path) == "preflight.yml":
            continue
        for task in _tasks(_load(path) or []):
            action = _action(task)
            body = {k: v for k, v in task.items() if k not in NOT_TASK_KEYS}
            if action is None and not PROBLEM_FILTER.search(_text(body)):
                continue
            if action is not None and action.endswith("assert"):
                tested = _text(task[action].get("that")) + " " + _text(task.get("when"))
            elif action is not None:
                tested = _text(task.get("when"))
            else:
                tested = _text(body)
            own = set(task.get("vars") or {})
            found.append((os.path.basename(path), task.get("name", ""), set(NAME.findall(tested)), own))
    return found


def _preflight(role):
    """``(text of what the preflight templates, its preflight_tasks file or None)``; follows an import of another
    role's preflight (tcpx_installer runs gpudirect_installer's)."""
    path = os.path.join(ROOT, "roles", role, "tasks", "preflight.yml")
    if not os.path.exists(path):
        return None, None
    text, tasks_file = "", None
    for task in _tasks(_load(path) or []):
        text += " " + _text(task.get("vars") or {})
        # a file name, or an expression that picks it by entry point
        tasks_file = next(iter(TASKS_FILE.findall((task.get("vars") or {}).get("preflight_tasks") or "")), tasks_file)
        for key in IMPORT_ROLE:
            imported = task.get(key) or {}
            name = imported.get("name", "").rsplit(".", 1)[-1]
            if name not in ("", "preflight", role) and imported.get("tasks_from") == "preflight":
                more, dummy = _preflight(name)
                text += " " + (more or "") + " " + _text(_role_vars(name))
    return text, tasks_file


def _role_vars(role):
    path = os.path.join(ROOT, "roles", role, "vars", "main.yml")
    return (_load(path) or {}) if os.path.exists(path) else {}


def _set_facts(role, tasks_file):
    """The facts the preflight's own tasks file sets (they are the role's definitions too)."""
    if not tasks_file:
        return {}
    found = {}
    for task in _tasks(_load(os.path.join(ROOT, "roles", role, "tasks", tasks_file)) or []):
        facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
        if isinstance(facts, dict):
            found.update(facts)
    return found


def _shared(role, tasks_file):
    """The names defined once for the role's tasks and its preflight, each with the names its definition reads."""
    definitions = dict(_role_vars(role), **_set_facts(role, tasks_file))
    for imported in _imported_roles(role):
        definitions.update(_role_vars(imported))
    return {name: set(NAME.findall(_text(value))) for name, value in definitions.items()}


def _imported_roles(role):
    path = os.path.join(ROOT, "roles", role, "tasks", "preflight.yml")
    found = []
    for task in _tasks(_load(path) or []) if os.path.exists(path) else []:
        for key in IMPORT_ROLE:
            name = (task.get(key) or {}).get("name", "").rsplit(".", 1)[-1]
            if name not in ("", "preflight"):
                found.append(name)
    return found


def _reached_names(text, shared):
    """The shared names the preflight reads, following the definitions."""
    seen, todo = set(), set(NAME.findall(text or ""))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo |= shared.get(name, set())
    return seen & set(shared)


def unreached(role):
    """The checks of ``role`` its preflight does not reach: ``(tasks file, task name)``."""
    text, tasks_file = _preflight(role)
    if text is None:
        return [(path, name) for path, name, dummy, dummy in checks(role)]
    shared = _shared(role, tasks_file)
    reached = _reached_names(text, shared)
    run_by_preflight = {tasks_file} if tasks_file else set()
    return [(path, name) for path, name, tested, own in checks(role)
            if path not in run_by_preflight and not (tested - own) & reached]


def _roles():
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles", "*", "tasks")))


def test_the_scan_finds_the_checks_of_every_kind():
    everything = {role: checks(role) for role in _roles()}
    assert sum(len(found) for found in everything.values()) > 50
    # a names list of vars/main.yml, a fact of the preflight's own tasks file, a task-local definition
    assert ("main.yml", "Check the names, the counts and the number of test nodes of nccl_test") in [
        (path, name) for path, name, dummy, dummy in everything["nccl_test"]]
    assert any("__awx_job_templates_problems" in tested for dummy, dummy, tested, dummy in everything["awx_job_templates"])
    assert any(own for dummy, dummy, dummy, own in everything["gke_gpu_cluster"])


def test_every_value_check_of_every_role_is_reached_by_its_preflight():
    missing = []
    for role in _roles():
        if role in ROLES_WITHOUT_PREFLIGHT:
            continue
        missing += [(role, path, name) for path, name in unreached(role)
                    if (role, path, name) not in CLUSTER_STATE and (role, path, name) not in NOT_YET]
    assert missing == [], (
        "these checks run only at the role's turn, after earlier roles changed things: define them once in the role's "
        "vars/main.yml and feed them to preflight_problems in tasks/preflight.yml (or, when they need the cluster's state, "
        "list them in CLUSTER_STATE with the reason): %s" % missing)


def test_every_exception_is_a_check_the_preflight_cannot_reach():
    unreachable = {(role, path, name) for role in _roles() for path, name in unreached(role)}
    stale = sorted((set(CLUSTER_STATE) | NOT_YET) - unreachable)
    assert stale == [], "not (or no longer) an unreached check: remove these from CLUSTER_STATE or NOT_YET: %s" % stale
    assert all(reason for reason in CLUSTER_STATE.values()), "every exception says why"
    assert all(os.path.isdir(os.path.join(ROOT, "roles", role)) and checks(role) for role in ROLES_WITHOUT_PREFLIGHT)


def test_the_roles_without_a_preflight_are_the_listed_ones():
    without = sorted(role for role in _roles() if _preflight(role)[0] is None and checks(role))
    assert without == sorted(ROLES_WITHOUT_PREFLIGHT), without
