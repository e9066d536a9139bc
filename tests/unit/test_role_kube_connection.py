# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One way to reach a cluster, and include chains a reader can follow.

The roles take the play's Kubernetes connection: module_defaults of ``group/gpu_ops.cluster.k8s`` (meta/runtime.yml),
which the playbooks set from ``gpu_ops_kubeconfig`` and ``gpu_ops_context`` through one vars file. No role has a
connection of its own, no role wraps its tasks in module_defaults, and every play that can reach Kubernetes gives the
connection. Which tasks reach Kubernetes is found from the tasks themselves: each play and entry point is followed
through include_tasks/import_tasks and include_role/import_role (of this collection's roles) to every Kubernetes module
it can run, so a new role, entry point, play or module cannot forget the connection.

The same walk measures include depth: no task sits more than MAX_DEPTH includes (include_tasks, include_role) below its
playbook. An import (import_tasks, import_role) adds no level: ansible-core parses the imported tasks into the file
that imports them, where they run as its own.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE_TASKS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks")
DYNAMIC = ("ansible.builtin.include_tasks", "include_tasks", "ansible.builtin.include_role", "include_role")
INCLUDE_ROLE = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
# the collection's own Kubernetes reads and waits (action plugins that read with the kubernetes.core connection options)
OWN_K8S = ("gpu_ops.cluster.k8s_objects_info", "gpu_ops.cluster.k8s_daemonset_wait", "gpu_ops.cluster.k8s_apply_plan")
MAX_DEPTH = 4
CONNECTION = "{{ gpu_ops_k8s_connection }}"
CONNECTION_FILE = "vars/kubernetes.yml"
# kubernetes.core's action groups that group/gpu_ops.cluster.k8s extends, as kubernetes.core 6.x declares them
# (its meta/runtime.yml); written here, not read from the installed copy, so that a change there shows as a failure
KUBERNETES_CORE_GROUPS = {
    "kubernetes.core.k8s": {"k8s", "k8s_exec", "k8s_info", "k8s_log", "k8s_scale", "k8s_service", "k8s_cp", "k8s_drain"},
    "kubernetes.core.helm": {"helm", "helm_info", "helm_repository"},
}

# the templated includes, followed by hand: roles/preflight/tasks/check.yml includes a read-only tasks file of the
# calling role (roles/preflight/README.md); apply's manifests.yml includes its render or its lookup tasks; the GKE
# playbooks include the installer of the cluster's profile
PREFLIGHT_ROLE_TASKS = "{{ __preflight_caller }}/tasks/{{ preflight_tasks }}"
APPLY_RENDER_OR_LOOKUP = ("{{ '_manifests_render.yml' if __apply_render | bool else '_manifests_lookup.yml' if __apply_lookup | bool"
                          " else '_manifests_check.yml' }}")
TEMPLATED_ROLES = {"gpu_ops.cluster.{{ gke_gpu_cluster_gpudirect }}_installer": ("tcpx_installer", "tcpxo_installer"),
                   "gpu_ops.cluster.{{ gke_gpudirect_choice }}_installer": ("tcpx_installer", "tcpxo_installer")}


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


def _load(role, name):
    return _read(os.path.normpath(os.path.join(ROOT, "roles", role, "tasks", name)))


def _resolve(role, name, target):
    """A tasks file an include or import names, as ansible-core finds it: in the role's tasks/ folder, else beside the
    file that names it (another role's file reached by a relative path, such as ../../preflight/tasks/check.yml)."""
    if os.path.isfile(os.path.join(ROOT, "roles", role, "tasks", target)):
        return target
    return os.path.normpath(os.path.join(os.path.dirname(name), target))


def _tasks(node):
    """Every task of a tasks file, blocks opened."""
    for task in node if isinstance(node, list) else []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _targets(role, name, task):
    """The (role, tasks file, levels) of what one task includes (one level) or imports (none), templated includes
    followed by hand."""
    level = 1 if any(key in DYNAMIC for key in task) else 0
    for key, value in task.items():
        if key in INCLUDE_TASKS:
            target = value["file"] if isinstance(value, dict) else value
            if target == PREFLIGHT_ROLE_TASKS:
                continue  # the calling role's read-only checks (mps validate.yml, ...): scanned as that role's files
            if " ".join(target.split()) == APPLY_RENDER_OR_LOOKUP:
                for part in ("_manifests_render.yml", "_manifests_lookup.yml", "_manifests_check.yml"):
                    yield role, _resolve(role, name, part), level
                continue
            assert "{{" not in target, "%s/%s: templated include %s (follow it by hand)" % (role, name, target)
            yield role, _resolve(role, name, target), level
        elif key in INCLUDE_ROLE:
            for other in TEMPLATED_ROLES.get(value["name"], (value["name"],)):
                if other.startswith("gpu_ops.cluster."):
                    yield other.split(".")[-1], value.get("tasks_from", "main") + ".yml", level


def _modules(task):
    """The Kubernetes modules one task runs itself."""
    found = set()
    for key in task:
        if key.startswith("kubernetes.core.") or key in OWN_K8S:
            found.add(key)
    return found


def _walk(role, name, depth=1, path=()):
    """(modules, deepest): the Kubernetes modules that roles/<role>/tasks/<name> can run, directly or through what it
    includes, and the include depth of its deepest tasks file, counting this file as ``depth``."""
    key = (role, name)
    if key in path:
        return set(), depth  # a cycle: what it reaches is counted where it started
    modules, deepest = set(), depth
    for task in _tasks(_load(role, name)):
        modules |= _modules(task)
        for other_role, other_name, level in _targets(role, name, task):
            found, below = _walk(other_role, other_name, depth + level, path + (key,))
            modules |= found
            deepest = max(deepest, below)
    return modules, deepest


def _plays(path):
    """Every play of a playbook, its import_playbook followed."""
    for play in _read(path):
        if "ansible.builtin.import_playbook" in play or "import_playbook" in play:
            target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
            yield from _plays(os.path.join(os.path.dirname(path), target))
        else:
            yield path, play


def _play_reach(play):
    """(modules, deepest) for one play: its tasks are at depth 0, a role's included entry point at depth 1."""
    modules, deepest = set(), 0
    for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
        for task in _tasks(play.get(section)):
            modules |= _modules(task)
            for role, name, level in _targets("", "", task):
                found, below = _walk(role, name, level)
                modules |= found
                deepest = max(deepest, below)
    for entry in play.get("roles") or []:
        role = (entry if isinstance(entry, str) else entry["role"]).split(".")[-1]
        found, below = _walk(role, "main.yml")
        modules |= found
        deepest = max(deepest, below)
    return modules, deepest


PLAYBOOKS = sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
PLAYS = [(os.path.basename(path), play) for playbook in PLAYBOOKS for path, play in _plays(playbook)]
REACHING = [(path, play) for path, play in PLAYS if _play_reach(play)[0]]
ROLE_TASK_FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")))


def _k8s_group():
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as handle:
        group = yaml.safe_load(handle)["action_groups"]["k8s"]
    members, extended = set(), set()
    for entry in group:
        if isinstance(entry, dict):
            extended |= set(entry["metadata"]["extend_group"])
        else:
            members.add(entry if "." in entry else "gpu_ops.cluster." + entry)
    for name in extended:
        members |= {"kubernetes.core." + module for module in KUBERNETES_CORE_GROUPS[name]}
    return members


def test_the_scan_finds_the_kubernetes_plays_and_roles():
    # a check on the scan itself: plays that certainly reach Kubernetes are found, the ones that cannot are not
    names = {(path, play["name"]) for path, play in REACHING}
    assert {("gpu_operator.yml", "Network Operator, GPU Operator, verification and RDMA test"),
            ("validate.yml", "Validate Kubernetes clusters (read-only)"),
            ("gke_gpudirect_teardown.yml", "Tear down GKE GPUDirect clusters"),
            ("aks_mig.yml", "AKS multi-instance GPU node pool with the NVIDIA device plugin")} <= names
    assert not [name for path, name in names if name.startswith("Render mode notice")]
    modules = set().union(*(_play_reach(play)[0] for _path, play in REACHING))
    assert {"kubernetes.core.k8s", "kubernetes.core.k8s_info", "kubernetes.core.helm", "kubernetes.core.k8s_cluster_info",
            "gpu_ops.cluster.k8s_daemonset_wait"} <= modules
    # and the walk counts depth: apply's send step is two includes below the role that includes it, an import none
    assert _walk("nri_device_injector", "main.yml")[1] == 3
    assert _walk("rdma_test", "main.yml")[1] == 3  # main imports run.yml, which includes apply


@pytest.mark.parametrize("path, play", REACHING, ids=["%s: %s" % (path, play["name"]) for path, play in REACHING])
def test_every_play_that_reaches_kubernetes_gives_the_connection(path, play):
    assert CONNECTION_FILE in (play.get("vars_files") or []), "%s: load %s" % (path, CONNECTION_FILE)
    defaults = play.get("module_defaults") or {}
    assert defaults.get("group/gpu_ops.cluster.k8s") == CONNECTION, "%s: module_defaults group/gpu_ops.cluster.k8s" % path
    # the one group: a kubernetes.core group or module named here as well would split the connection in two
    assert not [k for k in defaults if "kubernetes.core" in k], defaults


def test_the_k8s_group_covers_every_kubernetes_module_the_roles_run():
    run = set().union(*(_play_reach(play)[0] for _path, play in REACHING))
    for path in ROLE_TASK_FILES:
        role, name = path.split(os.sep)[-3], os.path.basename(path)
        run |= _walk(role, name)[0]
    assert run - _k8s_group() == set()


def test_the_connection_file_reads_the_pair_once():
    expression = _read(os.path.join(ROOT, "playbooks", CONNECTION_FILE))["gpu_ops_k8s_connection"]
    assert re.search(r"\bgpu_ops_kubeconfig\b", expression) and re.search(r"\bgpu_ops_context\b", expression)
    # no role reads the pair, nor has a connection of its own: the play's is the one connection
    for path in ROLE_TASK_FILES + glob.glob(os.path.join(ROOT, "roles", "*", "*", "main.yml")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        assert not re.search(r"\bgpu_ops_(kubeconfig|context|k8s_connection)\b", text), path


@pytest.mark.parametrize("path", ROLE_TASK_FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_no_role_sets_a_kubernetes_connection(path):
    assert not path.endswith("_auth.yml"), "a kubeconfig wrapper: the play gives the connection"
    for task in _tasks(_read(path)):
        defaults = task.get("module_defaults") or {}
        assert not [k for k in defaults if "kubernetes.core" in k or k.endswith(".k8s") or k in OWN_K8S], (path, defaults)


def test_no_role_declares_a_connection_of_its_own():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry, spec in _read(path)["argument_specs"].items():
            options = set(spec.get("options") or {})
            # gke_gpu_cluster_kubeconfig is the file that role writes for the new cluster, not a connection
            own = {o for o in options if re.fullmatch(r"%s_(kubeconfig|context)" % role, o)} - {"gke_gpu_cluster_kubeconfig"}
            assert not own, "%s/%s: %s (the play gives the connection)" % (role, entry, sorted(own))


@pytest.mark.parametrize("path, play", PLAYS, ids=["%s: %s" % (path, play["name"]) for path, play in PLAYS])
def test_no_task_sits_more_than_four_includes_below_its_playbook(path, play):
    assert _play_reach(play)[1] <= MAX_DEPTH
