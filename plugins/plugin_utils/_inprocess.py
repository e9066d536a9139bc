# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Run one of our modules inside the Ansible worker when a module subprocess would run the same Python here.

A module task normally costs a new Python process on the target: AnsiballZ unpacks the module, which imports
its engine and the cloud libraries (google-auth, requests, azure-identity) again for every task. When the
target is this controller (connection ``local``), the module would run with the controller's own Python
(``ansible_python_interpreter`` is the same interpreter and virtual environment), without become and without
async, the worker (a throwaway fork of ansible-playbook, which imported the action plugin and with it the
module and its engine once, before forking) runs the module's ``main()`` itself: the same arguments
(``_update_module_args``: check mode, diff, no_log...), serialized and read back with the same profile, the
task's ``environment:`` set in the worker, stdout and stderr captured, and the printed result decoded by the
action base's ``_parse_returned_data`` - so the result, a failure and an exception read as they would from
the subprocess. Anything else, or ``gpu_ops_in_process: false``, runs the module as ansible-core always does.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Sequence

from ansible import constants as C
from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.common.json import Direction, get_module_encoder
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._workers import freeze_inherited_objects_in_workers

try:  # what _execute_module does to a module process's result on ansible-core 2.19; later lines changed that step
    from ansible.vars.clean import remove_internal_keys
except ImportError:  # pragma: no cover - other ansible-core lines run every module as a subprocess
    remove_internal_keys = None

try:  # what the AnsiballZ wrapper prints for an exception a module does not handle (ansible-core 2.19+)
    from ansible.module_utils._internal._ansiballz._loader import _handle_exception
except ImportError:  # pragma: no cover - other ansible-core lines run every module as a subprocess
    _handle_exception = None

display = Display()

# the controller loads this with our action plugins, before it forks their workers
freeze_inherited_objects_in_workers()

OPT_OUT = "gpu_ops_in_process"
# Our modules declare no METADATA, so ansible-core builds them with the "legacy" serialization profile
# (executor/module_common.py, _DEFAULT_LEGACY_METADATA): arguments and result go through that profile here too.
PROFILE = "legacy"
LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local", "ansible.legacy.local"))
DISCOVERY = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")


def interpreter_identity(path):
    """``(real executable, real pyvenv.cfg or None)`` of an interpreter path, or None when it is no absolute path
    to an executable file. Two paths with the same identity start the same Python with the same site-packages: a
    virtual environment's python is a link to the base interpreter, and only the pyvenv.cfg next to the link (or
    one folder up, where CPython looks) tells them apart."""
    if not isinstance(path, str) or not path or path != path.strip() or " " in path:
        return None
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        return None
    real = os.path.realpath(path)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    for candidate in (os.path.join(folder, "pyvenv.cfg"), os.path.join(os.path.dirname(folder), "pyvenv.cfg")):
        if os.path.isfile(candidate):
            return real, os.path.realpath(candidate)
    return real, None


def supported():
    """Whether this ansible-core line has the steps an in-worker run reproduces (2.19; not 2.21)."""
    return _handle_exception is not None and remove_internal_keys is not None


def subprocess_reason(connection, interpreter, become, async_val, opted_in, environment, executable=None):
    """Why the module must run as a subprocess (a short phrase), or None when running it here is the same.

    ``connection``: the connection plugin's name; ``interpreter``: the templated python interpreter of the target;
    ``environment``: the task's final ``environment:``."""
    if not opted_in:
        return "%s is false" % OPT_OUT
    if connection not in LOCAL_CONNECTIONS:
        return "the connection is %s, not local" % connection
    if become:
        return "the task uses become"
    if async_val:
        return "the task runs async"
    mine = interpreter_identity(executable or sys.executable)
    if mine is None or interpreter_identity(interpreter) != mine:
        return "the target's python interpreter is not this controller's"
    if any(str(name).startswith("PYTHON") for name in environment or {}):
        return "the task's environment sets a PYTHON* variable"
    return None


@contextlib.contextmanager
def _module_process(environment):
    """What the module's process would have that this worker does not: the task's environment, its own stdout and
    stderr, and module_utils' per-process state (the module's arguments, its warnings and deprecations). The
    worker is a throwaway fork; everything is put back all the same."""
    saved_environ = dict(os.environ)
    saved_state = (basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE, getattr(basic, "_PARSED_MODULE_ARGS", None))
    saved_warnings = (dict(module_warnings._global_warnings), dict(module_warnings._global_deprecations))
    saved_cwd = os.getcwd()
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        os.environ.update((str(key), str(value)) for key, value in (environment or {}).items())
        module_warnings._global_warnings.clear()
        module_warnings._global_deprecations.clear()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            yield stdout, stderr
    finally:
        os.environ.clear()
        os.environ.update(saved_environ)
        basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved_state[:2]
        if hasattr(basic, "_PARSED_MODULE_ARGS"):
            basic._PARSED_MODULE_ARGS = saved_state[2]
        module_warnings._global_warnings.clear()
        module_warnings._global_warnings.update(saved_warnings[0])
        module_warnings._global_deprecations.clear()
        module_warnings._global_deprecations.update(saved_warnings[1])
        if os.getcwd() != saved_cwd:
            os.chdir(saved_cwd)


def run_main(main, module_args, environment=None, profile=PROFILE):
    """Run a module's ``main()`` here as the AnsiballZ wrapper runs it in a module process: the arguments as the
    serialized ``ANSIBLE_MODULE_ARGS``, an exception the module does not handle turned into the wrapper's failed
    result. Returns what the connection returns for a module process: ``{rc, stdout, stderr}``."""
    params = json.dumps(dict(ANSIBLE_MODULE_ARGS=module_args), cls=get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE))
    rc = 0
    with _module_process(environment) as (stdout, stderr):
        basic._ANSIBLE_ARGS = params.encode("utf-8")
        basic._ANSIBLE_PROFILE = profile
        try:
            try:
                main()
            except Exception as exc:  # pylint: disable=broad-except
                # the AnsiballZ wrapper's own catch (Exception, not BaseException: SystemExit is the module's exit)
                if _handle_exception is None:
                    raise
                _handle_exception(exc, profile)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return dict(rc=rc, stdout=stdout.getvalue(), stderr=stderr.getvalue())


class InProcessAction(NormalAction):
    """``normal`` whose module runs in the worker when that is certainly the same (see the module docstring).

    A subclass names the module's Python module (imported at the top of its action plugin file, so the
    controller imports it and its engine once, before the workers fork) as ``IN_PROCESS_MODULE``."""

    IN_PROCESS_MODULE = None

    def _in_process_reason(self, module_name, task_vars, wrap_async, environment):
        """Why this run goes to a subprocess, or None; fills ``environment`` with the task's final environment."""
        if self.IN_PROCESS_MODULE is None:
            return "no in-process entry point"
        if not supported():
            # the steps a module process's result goes through differ on this ansible-core line (2.21 reads results
            # through another path): only the 2.19 line's are reproduced here, so this line keeps the subprocess
            return "this ansible-core line runs our modules as module processes"
        if module_name not in (None, self._task.action):
            return "not the task's own module"
        use_vars = task_vars or {}
        if self._task.delegate_to:
            use_vars = (use_vars.get("ansible_delegated_vars") or {}).get(self._task.delegate_to) or {}
        opted_in = boolean(self._templar.template(use_vars.get(OPT_OUT, True)), strict=False)
        interpreter = self._templar.template(C.config.get_config_value("INTERPRETER_PYTHON", variables=use_vars))
        if not interpreter or interpreter in DISCOVERY:
            interpreter = (use_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
        self._compute_environment_string(environment)
        connection = getattr(self._connection, "ansible_name", None) or getattr(self._connection, "_load_name", "")
        return subprocess_reason(connection, interpreter, self._play_context.become, wrap_async or self._task.async_val,
                                 opted_in, environment)

    def _execute_module(self, module_name=None, module_args=None, tmp=None, task_vars=None, persist_files=False,
                        delete_remote_tmp=None, wrap_async=False, ignore_unknown_opts=False):
        environment = {}
        reason = self._in_process_reason(module_name, task_vars, wrap_async, environment)
        if reason is not None:
            display.vvv("gpu_ops.cluster: %s runs as a module process: %s" % (self._task.action, reason))
            return super()._execute_module(module_name=module_name, module_args=module_args, tmp=tmp,
                                           task_vars=task_vars, persist_files=persist_files,
                                           delete_remote_tmp=delete_remote_tmp, wrap_async=wrap_async,
                                           ignore_unknown_opts=ignore_unknown_opts)
        display.vvv("gpu_ops.cluster: %s runs in the worker" % self._task.action)
        task_vars = task_vars if task_vars is not None else {}
        module_args = self._task.args if module_args is None else module_args
        self._update_module_args(self._task.action, module_args, task_vars, ignore_unknown_opts=ignore_unknown_opts)
        data = self._parse_returned_data(run_main(self.IN_PROCESS_MODULE.main, module_args, environment), PROFILE)
        # what _execute_module does with a module process's result
        data.pop("_ansible_suppress_tmpdir_delete", None)
        if "results" in data and (not isinstance(data["results"], Sequence) or isinstance(data["results"], str)):
            data["ansible_module_results"] = data.pop("results")
            display.warning("Found internal 'results' key in module return, renamed to 'ansible_module_results'.")
        remove_internal_keys(data)
        for stream in ("stdout", "stderr"):
            if stream in data and stream + "_lines" not in data:
                data[stream + "_lines"] = (data.get(stream) or "").splitlines()
        return data
