# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a module may run in the worker, and what running it there returns (plugins/plugin_utils/_inprocess.py)."""

from __future__ import annotations

import json
import os
import sys

from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._inprocess import (
    interpreter_identity,
    run_main,
    subprocess_reason,
    supported,
)


def _executable(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_identity_tells_a_venv_python_from_its_base_interpreter(tmp_path):
    base = _executable(tmp_path / "python3.11")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s\n" % tmp_path)
    os.symlink(base, str(venv / "bin" / "python"))
    # a link to the venv's python (a checkout that links .venv) is the same venv
    os.symlink(str(venv), str(tmp_path / "linked"))
    assert interpreter_identity(str(venv / "bin" / "python")) == (base, str(venv / "pyvenv.cfg"))
    assert interpreter_identity(str(tmp_path / "linked" / "bin" / "python")) == \
        interpreter_identity(str(venv / "bin" / "python"))
    # same real file, but no venv: another Python as far as site-packages go
    assert interpreter_identity(base) == (base, None)
    assert interpreter_identity(base) != interpreter_identity(str(venv / "bin" / "python"))


def test_identity_needs_an_absolute_path_to_an_executable(tmp_path):
    (tmp_path / "plain").write_text("")
    for value in (None, "", "python3", "%s -X dev" % sys.executable, " %s" % sys.executable,
                  str(tmp_path / "missing"), str(tmp_path / "plain")):
        assert interpreter_identity(value) is None, value
    assert interpreter_identity(sys.executable) is not None


def _reason(**changes):
    """subprocess_reason of a run that may go in the worker, with ``changes``."""
    settings = dict(connection="ansible.builtin.local", interpreter=sys.executable, become=False, async_val=0,
                    opted_in=True, environment={"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"})
    settings.update(changes)
    return subprocess_reason(**settings)


def test_reasons_for_a_module_process():
    assert _reason() is None
    assert _reason(connection="local") is None
    assert _reason(opted_in=False) == "gpu_ops_in_process is false"
    assert _reason(connection="ssh") == "the connection is ssh, not local"
    assert _reason(connection="community.docker.docker").startswith("the connection is")
    assert _reason(become=True) == "the task uses become"
    assert _reason(async_val=30) == "the task runs async"
    assert _reason(interpreter="/usr/bin/env python3") == "the target's python interpreter is not this controller's"
    assert _reason(interpreter=None) == "the target's python interpreter is not this controller's"
    assert _reason(environment={"PYTHONPATH": "/x"}) == "the task's environment sets a PYTHON* variable"


def _module_main(**spec_kwargs):
    """A module main() like ours: AnsibleModule, then exit_json or fail_json (or an exception)."""
    def main():
        module = AnsibleModule(argument_spec=dict(name=dict(type="str", required=True),
                                                  token=dict(type="str", no_log=True),
                                                  boom=dict(type="bool", default=False)),
                               supports_check_mode=True, **spec_kwargs)
        if module.params["boom"]:
            raise RuntimeError("engine exploded")
        if module.params["name"] == "bad":
            module.fail_json(msg="name: bad is refused", token_echo=module.params["token"])
        print("noise a module library printed")
        sys.stderr.write("a warning on stderr\n")
        module.exit_json(changed=not module.check_mode, name=module.params["name"], env=os.environ.get("GPU_OPS_T"),
                         token_echo=module.params["token"], diff_mode=module._diff)
    return main


def _args(**options):
    base = dict(_ansible_check_mode=False, _ansible_diff=False, _ansible_no_log=False, _ansible_debug=False,
                _ansible_verbosity=0, _ansible_module_name="gpu_ops.cluster.t", _ansible_syslog_facility="LOG_USER",
                _ansible_selinux_special_fs=[], _ansible_keep_remote_files=False, _ansible_tmpdir=None,
                _ansible_remote_tmp="~/.ansible/tmp", _ansible_ignore_unknown_opts=False, _ansible_target_log_info=None,
                _ansible_shell_executable="/bin/sh", _ansible_socket=None, _ansible_version="2.19")
    base.update(options)
    return base


def _printed(raw):
    """The JSON object the module printed (the connection's stdout holds it after any noise)."""
    line = [entry for entry in raw["stdout"].splitlines() if entry.startswith("{")][-1]
    return json.loads(line)


def test_exit_prints_the_result_with_secrets_masked_and_the_environment_set():
    os.environ.pop("GPU_OPS_T", None)
    before = (basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE, os.getcwd())
    raw = run_main(_module_main(), _args(name="n1", token="s3cr3t-t0ken", _ansible_diff=True), {"GPU_OPS_T": 42})
    assert raw["rc"] == 0 and raw["stderr"] == "a warning on stderr\n"
    result = _printed(raw)
    assert result["changed"] is True and result["name"] == "n1" and result["env"] == "42" and result["diff_mode"]
    assert result["token_echo"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" and "s3cr3t-t0ken" not in raw["stdout"]
    if "invocation" in result or supported():  # ansible-core 2.21's modules return no invocation
        assert result["invocation"]["module_args"]["token"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    # the worker's environment and module_utils' per-process state are as they were
    assert "GPU_OPS_T" not in os.environ
    assert (basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE, os.getcwd()) == before


def test_check_mode_reaches_the_module():
    assert _printed(run_main(_module_main(), _args(name="n", _ansible_check_mode=True)))["changed"] is False


def test_fail_json_and_bad_arguments_exit_1_with_the_message():
    raw = run_main(_module_main(), _args(name="bad", token="tok-123456"))
    assert raw["rc"] == 1 and _printed(raw)["msg"] == "name: bad is refused" and _printed(raw)["failed"]
    assert "tok-123456" not in raw["stdout"]
    raw = run_main(_module_main(), _args(name="n", nmae="typo"))
    assert raw["rc"] == 1 and "nmae" in _printed(raw)["msg"]
    raw = run_main(_module_main(), _args())
    assert raw["rc"] == 1 and "missing required arguments: name" in _printed(raw)["msg"]


def test_an_unhandled_exception_is_the_wrappers_failed_result():
    raw = run_main(_module_main(), _args(name="n", boom=True))
    result = _printed(raw)
    assert raw["rc"] == 1 and result["failed"] is True
    assert "engine exploded" in json.dumps(result["exception"])


def test_warnings_of_one_run_do_not_leak_into_the_next():
    def warns():
        module = AnsibleModule(argument_spec={})
        module.warn("only once")
        module.exit_json(changed=False)

    first = _printed(run_main(warns, _args()))
    second = _printed(run_main(_module_main(), _args(name="n")))
    assert "only once" in json.dumps(first.get("warnings"))
    assert "warnings" not in second
