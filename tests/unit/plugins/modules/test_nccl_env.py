# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_env module itself: its argument spec, as AnsibleModule applies it before the engine runs.

The engine (plugins/module_utils/_host/nccl_conf.py) is tested in
tests/unit/plugins/module_utils/_host/test_nccl_conf.py.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.modules import nccl_env


def test_invalid_fabric_lists_choices(capsys):
    with patch_module_args(dict(fabric="efa")):
        with pytest.raises(SystemExit) as exit_info:
            nccl_env.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 1
    assert result["failed"] and "tcpx, tcpxo, rdma, rdma-a4x, ib, roce, socket" in result["msg"]
