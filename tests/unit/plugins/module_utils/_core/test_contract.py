# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one contract between a module and its engine (docs/behaviour-contract.md, "Modules").

Every module hands its AnsibleModule and its engine's ``run(params, context)`` to ``_core.contract.run_module``,
imports its engine(s) at the top of the file, and only ``run_module`` ends a module (exit_json / fail_json).
"""

from __future__ import annotations

import ast
import json
import os

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import Context, EngineError, run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import CloudSession, RenderSession

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))
PLUGINS = os.path.join(ROOT, "plugins")
# action plugins whose module file only documents them (no engine; main() refuses to run alone)
ACTION_ONLY = {"k8s_objects_info", "k8s_daemonset_wait", "k8s_apply_plan"}
MODULES = sorted(name[:-3] for name in os.listdir(os.path.join(PLUGINS, "modules"))
                 if name.endswith(".py") and name[:-3] not in ACTION_ONLY)
ENDS = {"exit_json", "fail_json"}


def _tree(*parts):
    with open(os.path.join(PLUGINS, *parts), encoding="utf-8") as handle:
        return ast.parse(handle.read())


def _calls(tree):
    return {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}


@pytest.mark.parametrize("name", MODULES)
def test_every_module_runs_its_engine_through_run_module(name):
    tree = _tree("modules", name + ".py")
    main = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"][0]
    called = {n.func.id for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "run_module" in called
    assert not _calls(tree) & ENDS
    engines = [a for n in tree.body if isinstance(n, ast.ImportFrom) and "module_utils._" in (n.module or "")
               for a in n.names if a.asname and a.asname.endswith("engine")]
    assert engines, "%s imports no engine as ...engine" % name
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        assert not [n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))], \
            "%s imports inside %s()" % (name, function.name)


@pytest.mark.parametrize("name", sorted(ACTION_ONLY))
def test_an_action_only_module_has_its_action_plugin_and_refuses_to_run_alone(name):
    assert os.path.isfile(os.path.join(PLUGINS, "action", name + ".py"))
    tree = _tree("modules", name + ".py")
    main = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"][0]
    assert _calls(main) & ENDS == {"fail_json"}, "%s: main() only refuses" % name
    assert not [n for n in tree.body if isinstance(n, ast.ImportFrom) and "module_utils._" in (n.module or "")]


def test_only_run_module_ends_a_module():
    found = []
    for folder, _dirs, files in os.walk(os.path.join(PLUGINS, "module_utils")):
        for name in files:
            if name.endswith(".py"):
                relpath = os.path.relpath(os.path.join(folder, name), PLUGINS)
                if _calls(_tree(relpath)) & ENDS:
                    found.append(relpath)
    assert found == [os.path.join("module_utils", "_core", "contract.py")]


def _run(engine_run, capsys, **args):
    with patch_module_args(args):
        module = AnsibleModule(argument_spec=dict(name=dict(type="str"), token=dict(type="str", no_log=True)),
                               supports_check_mode=True)
        with pytest.raises(SystemExit):
            run_module(module, engine_run)
    return json.loads(capsys.readouterr().out)


def test_the_result_is_exit_json_and_warnings_go_through_the_context(capsys):
    seen = []

    def engine_run(params, context):
        seen.append((params["name"], context.check_mode, context.diff))
        context.warn("careful")
        return dict(changed=True, name=params["name"])

    result = _run(engine_run, capsys, name="a", _ansible_check_mode=True, _ansible_diff=True)
    assert seen == [("a", True, True)]
    assert result["changed"] and result["name"] == "a" and "careful" in json.dumps(result["warnings"])
    assert "failed" not in result


def test_an_engine_error_is_fail_json_with_its_details_and_secrets_masked(capsys):
    def engine_run(params, context):
        raise EngineError("refused %s" % params["token"], problems=["name: bad"], status=None)

    result = _run(engine_run, capsys, name="a", token="s3cr3t-token")
    assert result["failed"] and result["problems"] == ["name: bad"] and "status" in result
    assert "s3cr3t-token" not in json.dumps(result)


def test_a_context_without_a_module_opens_sessions_through_its_hook():
    opened = []
    context = Context(dict(name="a"), session_factory=lambda cls, **kwargs: opened.append((cls, kwargs)) or "session")
    assert context.session(dict, poll=1) == "session" and opened == [(dict, dict(poll=1))]
    context.warn("dropped: no sink")
    assert not context.check_mode and not context.diff


class _RenderingSession(CloudSession):
    """A cloud session in render mode, as GcpSession / ArmSession build it (a RenderSession for HTTP)."""

    folder = None

    @classmethod
    def from_module(cls, module, **kwargs):
        session = cls()
        session.render = True
        session.render_session = RenderSession(cls.folder, "gcp", lambda method, url, body: dict(body or {}))
        return session


def test_a_render_run_returns_the_request_files_it_wrote(capsys, tmp_path):
    """The cloud modules' action plugin records these as the inventory host's (the PLAN.md host index)."""
    _RenderingSession.folder = str(tmp_path)

    def engine_run(params, context):
        session = context.session(_RenderingSession)
        session.render_session.request("GET", "https://example.test/v1/projects/p/global/networks/n")
        session.render_session.request("POST", "https://example.test/v1/projects/p/global/networks", json={"name": "n"})
        return dict(changed=True)

    result = _run(engine_run, capsys, name="a")
    assert result["render_files"] == [str(tmp_path / "requests" / "001-gcp-post-global_networks.json")]
    assert os.path.isfile(result["render_files"][0])


def test_a_run_that_renders_nothing_returns_no_request_files(capsys):
    result = _run(lambda params, context: dict(changed=False), capsys, name="a")
    assert "render_files" not in result
