# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No file of ours touches a private name of ansible-core, kubernetes.core or the kubernetes client.

A private name (an ``_``-prefixed module, function, class or attribute) may change in any release of those projects
without notice, so a collection that uses one breaks on the next upgrade without a test noticing. This test reads
every Python file of the collection (plugins, tests, benchmarks, scripts) and fails on:

- an import of a private module or name from those packages (``from ansible.executor.module_common import _x``,
  ``from ansible.module_utils import _internal``);
- an attribute that starts with ``_`` read from anything imported from them or assigned from a call of theirs
  (``basic._ANSIBLE_ARGS``, ``validated._no_log_values``, ``getattr(kube_config, "_cleanup_temp_files")``);
- in a class built on one of their classes (an action plugin), ``self._x`` where ``_x`` is neither defined by our own
  classes nor part of the action plugin interface that Ansible's developer guide documents.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("plugins", "tests", "benchmarks", "scripts")
SKIPPED_FOLDERS = {"output", "__pycache__", "charts", "data", "samples"}

# the packages whose private names we never touch
THEIRS = ("ansible", "ansible_collections.kubernetes.core", "kubernetes")

# ActionBase's interface for action plugins as Ansible's developer guide describes it ("Action plugins": the task,
# its connection and play context, the loader and templar, the shared plugin loader, and running a module with
# _execute_module), and the class flags every action plugin sets
ACTION_INTERFACE = frozenset((
    "_task", "_connection", "_play_context", "_loader", "_templar", "_shared_loader_obj", "_execute_module",
    "_SUPPORTS_CHECK_MODE", "_SUPPORTS_ASYNC", "_VALID_ARGS",
))

# (file, line text) that may touch a private name, with the reason; keep this empty unless there is no other way
ALLOWED = {
    # the unit tests load controller code (the templating engine) and module code in one process; ansible-core marks
    # the process as the controller for good, which changes where AnsibleModule.warn goes: each test starts as a module
    # process would. Test scaffolding only, never shipped code.
    ("tests/unit/conftest.py", "from ansible.module_utils import _internal as module_utils_internal"),
    ("tests/unit/conftest.py", 'monkeypatch.setattr(module_utils_internal, "is_controller", False)'),
    # ansible-core before 2.19 has no public way to hand a unit test's AnsibleModule its arguments (2.19 added
    # ansible.module_utils.testing.patch_module_args); its unit-testing guide for those lines sets this name. Taken on
    # those lines only, test scaffolding only.
    ("tests/unit/plugins/module_utils/module_args.py", 'with mock.patch.object(basic, "_ANSIBLE_ARGS", payload):'),
}


def _theirs(dotted):
    return any(dotted == top or dotted.startswith(top + ".") for top in THEIRS)


def _private(part):
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _files():
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.relpath(os.path.join(folder, name), ROOT)


def _our_class_names(trees):
    """Every ``_``-prefixed name that one of our classes defines (methods, class attributes, self assignments)."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    for target in item.targets:
                        if isinstance(target, ast.Name) and _private(target.id):
                            names.add(target.id)
                        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                              and target.value.id == "self" and _private(target.attr)):
                            names.add(target.attr)
    return names


def _chain_root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


class Finder(ast.NodeVisitor):
    def __init__(self, ours):
        self.ours = ours
        self.imported = set()  # local names bound to something of theirs
        self.based_on_theirs = False
        self.found = []

    def visit_Import(self, node):
        for alias in node.names:
            if _theirs(alias.name):
                if any(_private(p) for p in alias.name.split(".")):
                    self.found.append((node.lineno, "imports %s" % alias.name))
                self.imported.add((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level or not _theirs(module):
            return
        if any(_private(p) for p in module.split(".")):
            self.found.append((node.lineno, "imports from %s" % module))
        for alias in node.names:
            if _private(alias.name):
                self.found.append((node.lineno, "imports %s from %s" % (alias.name, module)))
            self.imported.add(alias.asname or alias.name)

    def visit_Assign(self, node):
        # what a call or attribute of theirs returns is theirs too (validated = ArgumentSpecValidator(...).validate(...))
        self.generic_visit(node)
        if _chain_root(node.value) in self.imported:
            self.imported.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def visit_ClassDef(self, node):
        outer = self.based_on_theirs
        if any(_chain_root(base) in self.imported for base in node.bases):
            self.based_on_theirs = True
        self.generic_visit(node)
        self.based_on_theirs = outer

    def visit_Attribute(self, node):
        if _private(node.attr):
            root = _chain_root(node.value)
            if root in self.imported:
                self.found.append((node.lineno, "reads %s of %s" % (node.attr, root)))
            elif root == "self" and self.based_on_theirs:
                direct = isinstance(node.value, ast.Name)
                if direct and node.attr not in ACTION_INTERFACE and node.attr not in self.ours:
                    self.found.append((node.lineno, "uses self.%s, private to ansible-core" % node.attr))
                elif not direct and _chain_root(node.value) == "self" and _via_interface(node.value):
                    self.found.append((node.lineno, "reads %s of an ansible-core object" % node.attr))
        self.generic_visit(node)

    def visit_Call(self, node):
        # getattr(x, "_y") and its kin, and the test helpers that take a name the same way: mock.patch.object(x, "_y"),
        # monkeypatch.setattr(x, "_y", ...)
        called = (node.func.id if isinstance(node.func, ast.Name)
                  else node.func.attr if isinstance(node.func, ast.Attribute) else None)
        if (called in ("getattr", "setattr", "hasattr", "delattr", "object")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and _private(node.args[1].value)
                and _chain_root(node.args[0]) in self.imported):
            self.found.append((node.lineno, "%s(..., %r) of %s" % (called, node.args[1].value,
                                                                   _chain_root(node.args[0]))))
        self.generic_visit(node)


def _via_interface(node):
    """Whether an attribute chain goes through one of ActionBase's documented objects (self._task.<...>)."""
    while isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr in ACTION_INTERFACE
        node = node.value
    return False


def _scan():
    trees = {}
    for relpath in _files():
        with open(os.path.join(ROOT, relpath), encoding="utf-8") as handle:
            source = handle.read()
        trees[relpath] = (ast.parse(source, relpath), source.splitlines())
    ours = _our_class_names(tree for tree, _lines in trees.values()) - ACTION_INTERFACE
    found = []
    for relpath, (tree, lines) in sorted(trees.items()):
        finder = Finder(ours)
        finder.visit(tree)
        for lineno, what in finder.found:
            text = lines[lineno - 1].strip()
            if (relpath, text) not in ALLOWED:
                found.append("%s:%d: %s" % (relpath, lineno, what))
    return found


def test_no_file_of_ours_touches_a_private_name_of_ansible_core_or_kubernetes_core():
    found = _scan()
    assert not found, "private names of other projects:\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("from ansible.executor.module_common import _apply_action_arg_defaults\n", "imports _apply_action_arg_defaults"),
    ("from ansible.module_utils._internal import x\n", "imports from ansible.module_utils._internal"),
    ("import ansible.module_utils._internal\n", "imports ansible.module_utils._internal"),
    ("from ansible.module_utils import basic\nbasic._ANSIBLE_ARGS = b''\n", "reads _ANSIBLE_ARGS of basic"),
    ("from ansible.module_utils import basic\nfrom unittest import mock\nmock.patch.object(basic, '_ANSIBLE_ARGS', b'')\n",
     "object(..., '_ANSIBLE_ARGS') of basic"),
    ("from ansible.module_utils import basic\ndef test(monkeypatch):\n    monkeypatch.setattr(basic, '_ANSIBLE_ARGS', b'')\n",
     "setattr(..., '_ANSIBLE_ARGS') of basic"),
    ("from kubernetes.config import kube_config\ngetattr(kube_config, '_cleanup_temp_files')()\n",
     "getattr(..., '_cleanup_temp_files') of kube_config"),
    ("from ansible.plugins.action import ActionBase\nclass A(ActionBase):\n"
     "    def run(self):\n        self._compute_environment_string({})\n",
     "uses self._compute_environment_string"),
    ("from ansible.module_utils.common.arg_spec import ArgumentSpecValidator\n"
     "validated = ArgumentSpecValidator({}).validate({})\nvalidated._no_log_values\n",
     "reads _no_log_values of validated"),
    ("from ansible.plugins.action import ActionBase\nclass A(ActionBase):\n"
     "    def run(self):\n        return self._task._parent\n",
     "reads _parent of an ansible-core object"),
])
def test_the_scanner_finds_each_kind_of_private_use(source, expected):
    finder = Finder(set())
    finder.visit(ast.parse(source))
    assert any(expected in what for _line, what in finder.found), finder.found


@pytest.mark.parametrize("source", [
    "from ansible.plugins.action import ActionBase\nclass A(ActionBase):\n"
    "    _SUPPORTS_CHECK_MODE = True\n    def run(self):\n"
    "        return self._execute_module(module_name='x', task_vars={}), self._task.args, self._templar\n",
    "from ansible.plugins.action import ActionBase\nclass A(ActionBase):\n"
    "    def _mine(self):\n        return 1\n    def run(self):\n        return self._mine()\n",
    "from ansible.module_utils.common.parameters import env_fallback\nenv_fallback('X')\n",
    "class Plain(object):\n    def run(self):\n        return self._anything\n",
])
def test_the_scanner_allows_public_names_and_our_own(source):
    tree = ast.parse(source)
    finder = Finder(_our_class_names([tree]) - ACTION_INTERFACE)
    finder.visit(tree)
    assert finder.found == []
