# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role entry point that reaches Kubernetes takes ``<role>_kubeconfig`` and ``<role>_context``.

Which entry points reach Kubernetes is found from the tasks themselves: each entry point's tasks file is followed
through include_tasks/import_tasks and include_role/import_role (of this collection's roles) to every kubernetes.core
module it can run. Such an entry point must declare both options in meta/argument_specs.yml, and its tasks file must
hand them on: one include of ``<entry>_auth.yml`` when ``__<role>_k8s_auth`` (built in vars/main.yml from the two
options) is set, else of the steps; ``<entry>_auth.yml`` is a block around the same steps whose module_defaults give
every kubernetes.core module the roles use that value. A new role, entry point or kubernetes.core module cannot forget
them.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE_TASKS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks")
INCLUDE_ROLE = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")


def _load(role, name):
    path = os.path.normpath(os.path.join(ROOT, "roles", role, "tasks", name))
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


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


# the templated includes, followed by hand: roles/preflight/tasks/check.yml includes a read-only tasks file of the
# calling role (roles/preflight/README.md); apply's manifests_steps.yml includes its render or its lookup tasks
PREFLIGHT_ROLE_TASKS = "{{ role_path }}/tasks/{{ preflight_tasks }}"
APPLY_RENDER_OR_LOOKUP = ("{{ 'manifests_render.yml' if __apply_render | bool else 'manifests_lookup.yml' if __apply_lookup | bool"
                          " else 'manifests_check.yml' }}")
# an entry point's one task: its kubeconfig wrapper (<entry>_auth.yml) when the role's auth is set, else its steps
ENTRY_CHOICE = re.compile(r"\{\{ '(?P<auth>\w+_auth\.yml)' if __(?P<role>\w+)_k8s_auth \| length > 0 else '(?P<steps>\w+\.yml)' \}\}")


def _reach(role, name, seen=None):
    """The kubernetes.core modules that roles/<role>/tasks/<name> can run, directly or through what it includes."""
    seen = set() if seen is None else seen
    if (role, name) in seen:
        return set()
    seen.add((role, name))
    modules = set()
    for task in _tasks(_load(role, name)):
        for key, value in task.items():
            if key.startswith("kubernetes.core."):
                modules.add(key)
            elif key in ("gpu_ops.cluster.k8s_objects_info", "gpu_ops.cluster.k8s_daemonset_wait", "gpu_ops.cluster.k8s_apply_plan"):
                # reads with kubernetes.core.k8s_info's connection options (its module_defaults), in the worker or through it
                modules.add("kubernetes.core.k8s_info")
            elif key in INCLUDE_TASKS:
                target = value["file"] if isinstance(value, dict) else value
                if target == PREFLIGHT_ROLE_TASKS:
                    continue  # the calling role's read-only checks (mps validate.yml, ...): scanned as that role's files
                if " ".join(target.split()) == APPLY_RENDER_OR_LOOKUP:
                    for part in ("manifests_render.yml", "manifests_lookup.yml", "manifests_check.yml"):
                        modules |= _reach(role, _resolve(role, name, part), seen)
                    continue
                choice = ENTRY_CHOICE.fullmatch(target)
                if choice:  # an entry point: its wrapper or its steps
                    for part in (choice["auth"], choice["steps"]):
                        modules |= _reach(role, _resolve(role, name, part), seen)
                    continue
                assert "{{" not in target, "%s/%s: templated include %s (follow it by hand)" % (role, name, target)
                modules |= _reach(role, _resolve(role, name, target), seen)
            elif key in INCLUDE_ROLE and value["name"].startswith("gpu_ops.cluster."):
                other = value["name"].split(".")[-1]
                modules |= _reach(other, value.get("tasks_from", "main") + ".yml", seen)
    return modules


def _entry_points():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        with open(path, encoding="utf-8") as handle:
            for entry, spec in yaml.safe_load(handle)["argument_specs"].items():
                yield role, entry, spec.get("options") or {}


KUBERNETES_ENTRY_POINTS = [(role, entry, options) for role, entry, options in _entry_points()
                           if _reach(role, entry + ".yml")]
# every kubernetes.core module that any role runs: the wrappers cover all of them, wherever they are used
MODULES = set().union(*(_reach(role, os.path.basename(path))
                        for role in os.listdir(os.path.join(ROOT, "roles"))
                        for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))))


def test_the_scan_finds_the_kubernetes_roles():
    # a check on the scan itself: the roles that certainly reach Kubernetes are found, the ones that do not are not
    found = {(role, entry) for role, entry, _options in KUBERNETES_ENTRY_POINTS}
    assert {("apply", "manifests"), ("apply", "chart"), ("nri_device_injector", "main"), ("tcpx_installer", "main"),
            ("gpudirect_installer", "wait"), ("mps", "kubernetes"), ("gke_gpu_cluster", "teardown")} <= found
    assert not {("apply", "names"), ("mps", "main"), ("nccl_test", "verdict"), ("awx_job_templates", "main"),
                ("render_notice", "start")} & found
    assert {"kubernetes.core.k8s", "kubernetes.core.k8s_info", "kubernetes.core.helm"} <= MODULES


@pytest.mark.parametrize("role, entry, options", KUBERNETES_ENTRY_POINTS, ids=lambda v: v if isinstance(v, str) else "")
def test_kubernetes_entry_points_declare_kubeconfig_and_context(role, entry, options):
    kubeconfig, context = options.get(role + "_kubeconfig"), options.get(role + "_context")
    assert kubeconfig and context, "%s/%s reaches Kubernetes: declare %s_kubeconfig and %s_context" % (role, entry, role, role)
    # kubernetes.core's types: kubeconfig is a path or a dict (raw); gke_gpu_cluster's is the path it writes (str)
    assert kubeconfig["type"] == ("str" if role == "gke_gpu_cluster" else "raw")
    assert context["type"] == "str"
    assert not kubeconfig.get("required") and not context.get("required")
    assert context.get("default") in (None, "")


@pytest.mark.parametrize("role, entry, options", KUBERNETES_ENTRY_POINTS, ids=lambda v: v if isinstance(v, str) else "")
def test_kubernetes_entry_points_hand_them_to_every_kubernetes_core_module(role, entry, options):
    auth = "__%s_k8s_auth" % role
    # the entry point is one include: <entry>_auth.yml when the role's own kubeconfig or context is set, else the steps
    [task] = _load(role, entry + ".yml")
    choice = ENTRY_CHOICE.fullmatch(task["ansible.builtin.include_tasks"])
    assert choice and choice["role"] == role and choice["auth"] == entry + "_auth.yml", task
    # the wrapper is one block, around the same steps
    [wrapper] = _load(role, choice["auth"])
    blocks = [wrapper] if "block" in wrapper and "module_defaults" in wrapper else []
    assert len(blocks) == 1, "%s/tasks/%s: wrap the steps in one block with module_defaults" % (role, choice["auth"])
    assert [t.get("ansible.builtin.include_tasks") for t in wrapper["block"]] == [choice["steps"]]
    assert "when" not in wrapper
    defaults = blocks[0]["module_defaults"]
    assert set(defaults) >= MODULES, "module_defaults of %s/%s lack %s" % (role, entry, sorted(MODULES - set(defaults)))
    assert {defaults[m] for m in MODULES} == {"{{ %s }}" % auth}
    # per module, never group/...: a group key would replace the play's group defaults instead of adding to them
    assert not [k for k in defaults if k.startswith("group/")]
    with open(os.path.join(ROOT, "roles", role, "vars", "main.yml"), encoding="utf-8") as handle:
        expression = yaml.safe_load(handle)[auth]
    assert re.search(r"\b%s_kubeconfig\b" % role, expression) and re.search(r"\b%s_context\b" % role, expression)
