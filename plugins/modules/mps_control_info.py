#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mps_control_info
short_description: Health check of an NVIDIA MPS control daemon - servers, clients and defaults
version_added: 0.1.0
description:
  - Asks the control daemon on O(pipe_directory) through C(nvidia-cuda-mps-control) - C(get_server_list),
    C(get_default_active_thread_percentage), and C(get_client_list) for every server.
  - A daemon that does not answer is reported as not running; nothing fails and nothing changes.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
options:
  pipe_directory:
    description: The daemon's C(CUDA_MPS_PIPE_DIRECTORY) (absolute).
    type: path
    required: true
  control_binary:
    description: Path or name of C(nvidia-cuda-mps-control).
    type: str
    default: nvidia-cuda-mps-control
seealso:
  - module: gpu_ops.cluster.mps_control
"""

EXAMPLES = r"""
- name: Health check
  gpu_ops.cluster.mps_control_info:
    pipe_directory: /tmp/nvidia-mps
  register: mps

- name: Fail when the daemon does not answer
  ansible.builtin.assert:
    that: mps.running
    fail_msg: The MPS control daemon does not answer on /tmp/nvidia-mps
"""

RETURN = r"""
running:
  description: Whether the daemon answers.
  returned: always
  type: bool
servers:
  description: The MPS servers, each with its C(pid) and its C(clients) (PIDs).
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 4242, "clients": [4250, 4261]}]
default_active_thread_percentage:
  description: The daemon's default active thread percentage (null when it does not run).
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mps as engine


def main():
    module = AnsibleModule(
        argument_spec=dict(pipe_directory=dict(type="path", required=True),
                           control_binary=dict(type="str", default="nvidia-cuda-mps-control")),
        supports_check_mode=True)
    run_module(module, engine.run_info)


if __name__ == "__main__":
    main()
