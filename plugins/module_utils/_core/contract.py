# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one contract between a module and its engine.

A module builds its ``AnsibleModule`` and hands it, with its engine's entry point, to ``run_module``::

    from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import cluster as engine

    def main():
        run_module(AnsibleModule(argument_spec=..., supports_check_mode=True), engine.run)

An engine's entry point is ``run(params, context)``: it returns the module's result as a dict (``changed``,
``diff``, the documented return values) or raises ``EngineError`` (or a subclass) whose message and details
become ``fail_json(msg=..., **details)``. ``run_module`` is the only place that calls ``exit_json`` or
``fail_json``; engines never see the ``AnsibleModule``, only the ``Context``.
"""

from __future__ import annotations


class EngineError(Exception):
    """A run that fails: ``msg`` and ``details`` are what the module fails with (``fail_json(msg, **details)``)."""

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.msg = msg
        self.details = details


class Context:
    """What an engine may use of the module run, and nothing more.

    ``params`` (the validated options), ``check_mode``, ``diff``, ``warn(message)``, ``debug(message)``
    (the ``-vvvv`` log), ``run_command(argv, **kwargs)`` and ``get_bin_path(name, **kwargs)`` (AnsibleModule's),
    ``files`` (an object with AnsibleModule's file helpers ``atomic_move``, ``load_file_common_arguments``
    and ``set_fs_attributes_if_different``), ``no_log_values`` (the set Ansible masks in the result) and
    ``session(session_class, **kwargs)``: a logged-in cloud session of that class built from the options.
    """

    def __init__(self, params, check_mode=False, diff=False, warn=None, debug=None, run_command=None,
                 get_bin_path=None, files=None, no_log_values=None, session_factory=None):
        self.params = params
        self.check_mode = bool(check_mode)
        self.diff = bool(diff)
        self._warn = warn
        self.debug = debug
        self.run_command = run_command
        self.get_bin_path = get_bin_path
        self.files = files
        self.no_log_values = no_log_values
        self._session_factory = session_factory
        self.sessions = []

    @classmethod
    def from_module(cls, module):
        """The context of one AnsibleModule run."""
        return cls(module.params, check_mode=module.check_mode, diff=getattr(module, "_diff", False),
                   warn=module.warn, debug=module.debug, run_command=module.run_command,
                   get_bin_path=module.get_bin_path, files=module, no_log_values=module.no_log_values)

    def warn(self, message):
        """A warning shown with the task's result (dropped when the context has no sink)."""
        if self._warn is not None:
            self._warn(message)

    def session(self, session_class, **kwargs):
        """A session of ``session_class`` (a ``_transport.CloudSession``) for this run, from this context's
        options (``session_class.from_module``; ``kwargs`` go to its constructor, for tests). A hook
        ``session_factory(session_class, **kwargs)`` given to the constructor replaces it."""
        if self._session_factory is not None:
            session = self._session_factory(session_class, **kwargs)
        else:
            session = session_class.from_module(self, **kwargs)
        self.sessions.append(session)
        return session

    def rendered(self):
        """The request files the sessions of this run wrote in render mode (``render_dir``), in order."""
        return [path for session in self.sessions for path in (getattr(session, "rendered", None) or list)()]


def run_module(module, engine_run):
    """Run ``engine_run(module.params, context)`` and end the module with its result: ``exit_json(**result)``,
    or ``fail_json(msg=..., **details)`` when it raises ``EngineError``. The only caller of either.

    A run that wrote request files in render mode also returns them as ``render_files`` (absolute paths): the
    module's action plugin (``plugin_utils/_clouds/action.py``) takes them out of the result and records
    them in the render folder's host index (``plugin_utils/_render/plan.py``)."""
    context = Context.from_module(module)
    try:
        result = engine_run(module.params, context)
    except EngineError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    else:
        rendered = context.rendered()
        module.exit_json(**(dict(result, render_files=rendered) if rendered else result))
