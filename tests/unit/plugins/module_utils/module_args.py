# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``patch_module_args`` on every ansible-core line the collection supports (meta/runtime.yml).

ansible-core 2.19 added ``ansible.module_utils.testing.patch_module_args``, the public way for a unit test to hand
``AnsibleModule`` its arguments, and the tests use it wherever it exists. The older lines have no public way:
``AnsibleModule`` reads its arguments once per process into ``basic._ANSIBLE_ARGS``, and ansible-core's own guide to
unit-testing modules of those lines sets that name. The stand-in below does the same, for the lines without the
public helper only, and restores it on leaving. Test scaffolding: no shipped code imports this file, and its name does
not start with test_, so no runner collects it.
"""

from __future__ import annotations

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19
    import contextlib
    import json
    from unittest import mock

    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    @contextlib.contextmanager
    def patch_module_args(args=None):
        """Expose ``args`` to the ``AnsibleModule`` instances created within this context."""
        if not isinstance(args, (dict, type(None))):
            raise TypeError("The `args` arg must be a dict or None.")
        payload = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}))
        with mock.patch.object(basic, "_ANSIBLE_ARGS", payload):
            yield

__all__ = ("patch_module_args",)
