# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The layer rules of docs/layout.md, held by walking the import graph of plugins/.

Every import of the collection's own code is read from the source (top-level and lazy imports alike),
so a rule broken anywhere in a file fails here with the file, the line and the rule.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
OURS = "ansible_collections.gpu_ops.cluster.plugins."

# layer -> the layers it may import (its own is always allowed)
MODULE_UTILS_LAYERS = {
    "_core": set(),
    "_catalog": {"_core"},
    "_parsers": {"_core"},
    "_mig": {"_core", "_catalog"},
    "_host": {"_core", "_catalog", "_parsers", "_mig"},
    "_nodepool": {"_core", "_catalog", "_mig"},
    "_gcp": {"_core", "_catalog", "_mig", "_nodepool"},
    "_azure": {"_core", "_catalog", "_mig", "_nodepool"},
}
# plugin_utils rooms (controller-only code) -> the rooms each may import (its own is always allowed); every room may
# import module_utils
PLUGIN_UTILS_ROOMS = {
    "_core": set(),  # filter inputs and role argument specs
    "_k8s": {"_core"},  # the Kubernetes reader, names, manifests, in-place plans, waits, DaemonSet reports
    "_awx": {"_core"},  # AWX/AAP names, credentials and surveys
    "_render": {"_core"},  # the render plan summary (PLAN.md)
    "_clouds": {"_core", "_render"},  # the base of the cloud modules' action plugins
    "_sharing": {"_core", "_k8s"},  # GPU sharing and allocation on Kubernetes (MPS, time-slicing)
    "_gpudirect": {"_core", "_k8s"},  # the GPUDirect workload patcher
    "_operators": {"_core", "_k8s"},  # GPU and Network Operator plans and readiness
    "_perf": {"_core", "_operators"},  # nccl-tests and perftest parsing, bandwidth reports
    "_validate": {"_core", "_k8s", "_sharing", "_gpudirect", "_operators", "_perf"},  # validation checks and reports
}
CLOUDS = {"_gcp", "_azure"}


def _python_files(top):
    for folder, _dirs, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), PLUGINS)


def _our_imports(relpath):
    """(line, dotted target below plugins.) of every import of our own code in one file."""
    with open(os.path.join(PLUGINS, relpath), encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), relpath)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(OURS):
            for alias in node.names:
                found.append((node.lineno, node.module[len(OURS):] + "." + alias.name))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name[len(OURS):]) for a in node.names if a.name.startswith(OURS))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "engine"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.startswith(OURS)):
            # a filter's engine imported on first use (plugin_utils/_core/lazy.py) is an import all the same
            found.append((node.lineno, node.args[0].value[len(OURS):]))
    return found


def _layer(dotted):
    """('module_utils', '_gcp') of 'module_utils._gcp.cluster.X', ('plugin_utils', '_k8s') of 'plugin_utils._k8s.reader';
    ('filter', None) and the like."""
    parts = dotted.split(".")
    if parts[0] == "module_utils" and len(parts) > 1 and parts[1] in MODULE_UTILS_LAYERS:
        return "module_utils", parts[1]
    if parts[0] == "plugin_utils" and len(parts) > 1 and parts[1] in PLUGIN_UTILS_ROOMS:
        return "plugin_utils", parts[1]
    return parts[0], None


def _foreign_private(kind, own, target):
    """Whether ``target`` is a ``_``-prefixed name defined in another plugin, or in another plugin_utils room (a file
    of a room may share its helpers with the room; module_utils layers share theirs by the layer rules)."""
    parts = target.split(".")
    if not parts[-1].startswith("_") or parts[0] == "module_utils":
        return False
    if parts[0] == "plugin_utils":
        return len(parts) > 3 and not (kind == "plugin_utils" and parts[1] == own)
    return len(parts) > 2  # action.k8s_objects_info._query: another plugin's helper


def _violations():
    problems = []
    for relpath in _python_files(PLUGINS):
        kind = relpath.split(os.sep)[0]
        own = _layer(relpath[:-3].replace(os.sep, "."))[1] if kind in ("module_utils", "plugin_utils") else None
        for line, target in _our_imports(relpath):
            where = "%s:%d imports %s" % (relpath, line, target)
            target_kind, target_layer = _layer(target)
            if target_kind == "plugin_utils" and kind not in ("filter", "action", "plugin_utils"):
                problems.append(where + ": only filters and action plugins (controller side) may import plugin_utils")
            if _foreign_private(kind, own, target):
                problems.append(where + ": a private name of another room or plugin")
            if kind == "plugin_utils":
                if own is None:
                    problems.append(where + ": every plugin util lives in a room (docs/layout.md)")
                elif target_kind == "plugin_utils" and target_layer != own and target_layer not in PLUGIN_UTILS_ROOMS[own]:
                    allowed = ", ".join(sorted(PLUGIN_UTILS_ROOMS[own])) or "module_utils"
                    problems.append(where + ": %s may import only %s" % (own, allowed))
                elif target_kind in ("action", "filter", "modules"):
                    problems.append(where + ": plugin_utils never imports a plugin")
            if kind != "module_utils" or target_kind != "module_utils":
                continue
            if target_layer is None:
                problems.append(where + ": every module_util lives in a layer subpackage")
            elif target_layer != own and target_layer not in MODULE_UTILS_LAYERS[own]:
                problems.append(where + ": %s may import only %s" % (own, ", ".join(sorted(MODULE_UTILS_LAYERS[own])) or "itself"))
            elif own in CLOUDS and target_layer in CLOUDS and target_layer != own:
                problems.append(where + ": one cloud never imports the other")
    return problems


def test_every_import_keeps_the_layer_rules():
    assert _violations() == []


def test_every_plugin_util_sits_in_a_room():
    files = [p.split(os.sep)[1:] for p in _python_files(os.path.join(PLUGINS, "plugin_utils"))]
    assert [f for f in files if len(f) == 1] == []
    assert {f[0] for f in files} == set(PLUGIN_UTILS_ROOMS)


def test_every_module_util_sits_in_a_layer():
    files = [p.split(os.sep)[1:] for p in _python_files(os.path.join(PLUGINS, "module_utils"))]
    assert [f for f in files if len(f) == 1] == []
    layers = {f[0] for f in files}
    assert layers == set(MODULE_UTILS_LAYERS)


def test_every_private_file_says_so_and_what_it_is_for():
    for top in ("module_utils", "plugin_utils"):
        for relpath in _python_files(os.path.join(PLUGINS, top)):
            with open(os.path.join(PLUGINS, relpath), encoding="utf-8") as handle:
                source = handle.read()
            assert "**PRIVATE**" in source, relpath
            assert ast.get_docstring(ast.parse(source)), relpath


def test_no_cycles_between_files():
    graph = {}
    for relpath in _python_files(PLUGINS):
        name = relpath[:-3].replace(os.sep, ".")
        targets = set()
        for _line, target in _our_imports(relpath):
            # "module_utils._gcp.session.GcpSession" or "module_utils._gcp.session" -> the file's dotted name
            while target and not os.path.exists(os.path.join(PLUGINS, target.replace(".", os.sep) + ".py")):
                target = target.rpartition(".")[0]
            if target:
                targets.add(target)
        graph[name] = targets
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join(path + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


@pytest.mark.parametrize("rule_breaker, expected", [
    ("from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession", "_azure"),
    ("from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names as _k8s_names", "plugin_utils"),
    ('names = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.names")', "plugin_utils"),
])
def test_the_rule_check_catches_a_broken_rule(tmp_path, monkeypatch, rule_breaker, expected):
    """The walk is not vacuous: an AKS engine that imports the GCP session, or a module_util that imports
    controller code, is reported."""
    fake_root = tmp_path / "plugins"
    (fake_root / "module_utils" / "_azure").mkdir(parents=True)
    (fake_root / "module_utils" / "_azure" / "nodepool.py").write_text(rule_breaker + "\n")
    monkeypatch.setitem(globals(), "PLUGINS", str(fake_root))
    found = _violations()
    assert len(found) == 1 and expected in found[0] and "_azure/nodepool.py:1" in found[0]


@pytest.mark.parametrize("relpath, rule_breaker, expected", [
    ("plugin_utils/_k8s/reader.py", "from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import report",
     "_k8s may import only _core"),
    ("plugin_utils/_k8s/reader.py", "from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import _show",
     "a private name of another room"),
    ("plugin_utils/_k8s/reader.py", "from ansible_collections.gpu_ops.cluster.plugins.action import k8s_objects_info",
     "plugin_utils never imports a plugin"),
    ("plugin_utils/loose.py", "from ansible_collections.gpu_ops.cluster.plugins.module_utils._core import waiter",
     "every plugin util lives in a room"),
    ("action/k8s_apply_plan.py", "from ansible_collections.gpu_ops.cluster.plugins.action.k8s_objects_info import _query",
     "a private name of another room or plugin"),
])
def test_the_rooms_of_plugin_utils_are_held(tmp_path, monkeypatch, relpath, rule_breaker, expected):
    fake_root = tmp_path / "plugins"
    (fake_root / relpath).parent.mkdir(parents=True)
    (fake_root / relpath).write_text(rule_breaker + "\n")
    monkeypatch.setitem(globals(), "PLUGINS", str(fake_root))
    found = _violations()
    assert len(found) == 1 and expected in found[0], found


def test_a_room_shares_its_own_helpers():
    assert not _foreign_private("plugin_utils", "_operators", "plugin_utils._operators.inputs._catalog_chart")
    assert _foreign_private("plugin_utils", "_perf", "plugin_utils._operators.inputs._catalog_chart")
    assert not _foreign_private("filter", None, "plugin_utils._k8s.names")


# ---- unit tests mirror the source (docs/layout.md) ---------------------------------------------

TESTS = os.path.join(ROOT, "tests", "unit", "plugins")
ENGINE_FOLDERS = ("module_utils", "plugin_utils")
# Engine files allowed to lack a test at the mirrored path: none. The GKE engines and nccl_conf, once tested only
# through their modules in tests/unit/plugins/modules/, have theirs now; keep this empty (a new entry needs a reason,
# and test_the_allowlist_names_only_engines_still_without_a_test fails on a stale one).
NOT_YET_MIRRORED = frozenset()


def mirrored_test(relpath):
    """plugins/<relpath> -> its test below tests/unit/plugins: the same folders, ``test_`` + the file name without
    its leading underscores (module_utils/_gcp/offers.py -> module_utils/_gcp/test_offers.py,
    plugin_utils/_perf/perftest.py -> plugin_utils/_perf/test_perftest.py)."""
    folder, name = os.path.split(relpath)
    return os.path.join(folder, "test_" + name.lstrip("_"))


def _engine_files(plugins):
    """module_utils/... and plugin_utils/... paths (with /) of every engine file below ``plugins``."""
    for top in ENGINE_FOLDERS:
        for folder, _dirs, files in os.walk(os.path.join(plugins, top)):
            for name in sorted(files):
                if name.endswith(".py") and name != "__init__.py":
                    yield os.path.relpath(os.path.join(folder, name), plugins).replace(os.sep, "/")


def _missing_tests(plugins, tests, allowed=frozenset()):
    """'<source> -> <test>' for every engine file without a test file at the mirrored path."""
    return ["plugins/%s -> tests/unit/plugins/%s" % (relpath, mirrored_test(relpath))
            for relpath in _engine_files(plugins)
            if relpath not in allowed and not os.path.isfile(os.path.join(tests, mirrored_test(relpath)))]


def test_every_engine_file_has_a_test_at_the_mirrored_path():
    missing = _missing_tests(PLUGINS, TESTS, NOT_YET_MIRRORED)
    assert missing == [], "engine files without a unit test at the mirrored path:\n" + "\n".join(missing)


def test_no_two_engine_files_share_a_test_path():
    seen = {}
    for relpath in _engine_files(PLUGINS):
        seen.setdefault(mirrored_test(relpath), []).append(relpath)
    assert {test: files for test, files in seen.items() if len(files) > 1} == {}


def test_every_engine_test_file_mirrors_a_source_file():
    """No test file below tests/unit/plugins/{module_utils,plugin_utils} without its source (a stale or misnamed one)."""
    expected = {mirrored_test(relpath).replace(os.sep, "/") for relpath in _engine_files(PLUGINS)}
    found = []
    for top in ENGINE_FOLDERS:
        for folder, _dirs, files in os.walk(os.path.join(TESTS, top)):
            found.extend(os.path.relpath(os.path.join(folder, name), TESTS).replace(os.sep, "/")
                         for name in files if name.startswith("test_") and name.endswith(".py"))
    assert sorted(set(found) - expected) == []


def test_the_allowlist_names_only_engines_still_without_a_test():
    engines = set(_engine_files(PLUGINS))
    assert sorted(NOT_YET_MIRRORED - engines) == [], "allowlisted files that no longer exist"
    mirrored = [relpath for relpath in sorted(NOT_YET_MIRRORED) if os.path.isfile(os.path.join(TESTS, mirrored_test(relpath)))]
    assert mirrored == [], "these have a mirrored test now: take them off NOT_YET_MIRRORED"


def test_the_mirror_check_lists_what_is_missing(tmp_path):
    """The check is not vacuous: a source file without its test is listed, one with its test is not."""
    plugins, tests = tmp_path / "plugins", tmp_path / "tests"
    for relpath in ("module_utils/_core/waiter.py", "module_utils/_gcp/offers.py", "plugin_utils/_operators/readiness.py",
                    "plugin_utils/_perf/perftest.py", "plugin_utils/__init__.py"):
        (plugins / relpath).parent.mkdir(parents=True, exist_ok=True)
        (plugins / relpath).write_text('"""x"""\n')
    (tests / "module_utils" / "_core").mkdir(parents=True)
    (tests / "module_utils" / "_core" / "test_waiter.py").write_text("")
    (tests / "plugin_utils" / "_perf").mkdir(parents=True)
    (tests / "plugin_utils" / "_perf" / "test_perftest.py").write_text("")
    assert _missing_tests(str(plugins), str(tests)) == [
        "plugins/module_utils/_gcp/offers.py -> tests/unit/plugins/module_utils/_gcp/test_offers.py",
        "plugins/plugin_utils/_operators/readiness.py -> tests/unit/plugins/plugin_utils/_operators/test_readiness.py",
    ]
    assert _missing_tests(str(plugins), str(tests), {"module_utils/_gcp/offers.py"}) == [
        "plugins/plugin_utils/_operators/readiness.py -> tests/unit/plugins/plugin_utils/_operators/test_readiness.py"]
