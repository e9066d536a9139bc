#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mps_control
short_description: Start, configure, check and stop an NVIDIA MPS control daemon without stranding its clients
version_added: 0.1.0
description:
  - Talks to one NVIDIA Multi-Process Service control daemon through C(nvidia-cuda-mps-control) and the daemon's pipe
    directory (C(CUDA_MPS_PIPE_DIRECTORY)).
  - V(present) - starts the daemon with C(nvidia-cuda-mps-control -d) and O(environment) when none answers (unless
    O(start=false), for a daemon that systemd starts), then sets the default active thread percentage and the default
    pinned device memory limits through the control pipe where they differ. Defaults only apply to MPS servers started
    afterwards; running clients keep theirs.
  - V(absent) - stops the daemon with C(quit), but never strands clients - with O(stop_policy=refuse) it fails while any
    MPS server has clients and names them; with O(stop_policy=drain) it waits up to O(drain_timeout) seconds for them to
    finish, then stops (and fails, changing nothing, when they do not). With O(quit=false) only that check runs (the role
    lets systemd send C(quit)).
  - V(absent) on a host without the control binary (O(control_binary) not on E(PATH), or no such executable file) succeeds
    without a change - no daemon can run there, so there is nothing to stop. V(present) fails there, naming the binary.
  - The health check (C(get_server_list) answered through the pipe) is M(gpu_ops.cluster.mps_control_info).
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
attributes:
  check_mode:
    details:
      - Reads the daemon; reports what it would start, set or stop. O(stop_policy=refuse) fails in check mode too when clients run.
  diff_mode:
    support: none
options:
  state:
    description: What the daemon should be.
    type: str
    choices: [present, absent]
    default: present
  pipe_directory:
    description: The daemon's C(CUDA_MPS_PIPE_DIRECTORY) (absolute). It must exist before the daemon starts.
    type: path
    required: true
  environment:
    description:
      - The daemon's environment when this module starts it, for example the C(environment) of
        P(gpu_ops.cluster.mps_host_settings#filter) (C(CUDA_MPS_LOG_DIRECTORY), C(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE),
        C(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), C(CUDA_VISIBLE_DEVICES)). C(CUDA_MPS_PIPE_DIRECTORY) is always O(pipe_directory).
    type: dict
    default: {}
  control_binary:
    description:
      - Path or name (searched on E(PATH)) of C(nvidia-cuda-mps-control).
      - When it is not installed, O(state=absent) is a no-op and O(state=present) fails.
    type: str
    default: nvidia-cuda-mps-control
  start:
    description: With O(state=present), start the daemon when it does not answer; V(false) fails instead.
    type: bool
    default: true
  active_thread_percentage:
    description: Default active thread percentage of new MPS servers (1-100). Unset leaves the daemon's.
    type: int
  pinned_device_mem_limit:
    description: Default pinned device memory limit of new MPS clients per device (index or UUID), as V(<n>G) or V(<n>M).
    type: dict
    default: {}
  stop_policy:
    description: What V(absent) does while MPS clients run - V(refuse) fails, V(drain) waits for them.
    type: str
    choices: [refuse, drain]
    default: refuse
  drain_timeout:
    description: Seconds V(drain) waits for the clients.
    type: int
    default: 600
  poll_interval:
    description: Seconds between two client checks while draining.
    type: int
    default: 5
  quit:
    description: With O(state=absent), send C(quit) after the client check; V(false) only checks (the service manager stops the daemon).
    type: bool
    default: true
notes:
  - Needs no GPU library on the controller; runs on the GPU host. The collection's tests drive a strict fake
    C(nvidia-cuda-mps-control) (tests/fakes).
seealso:
  - module: gpu_ops.cluster.mps_control_info
  - name: NVIDIA Multi-Process Service documentation
    description: Control daemon commands and environment.
    link: https://docs.nvidia.com/deploy/mps/
"""

EXAMPLES = r"""
- name: Start a daemon with half the SMs and 10 GiB of pinned memory per client on GPU 0
  gpu_ops.cluster.mps_control:
    pipe_directory: /run/nvidia-mps
    environment:
      CUDA_MPS_LOG_DIRECTORY: /var/log/nvidia-mps
    active_thread_percentage: 50
    pinned_device_mem_limit:
      "0": 10G

- name: Stop it once its clients have finished (at most 20 minutes)
  gpu_ops.cluster.mps_control:
    state: absent
    pipe_directory: /run/nvidia-mps
    stop_policy: drain
    drain_timeout: 1200
"""

RETURN = r"""
running:
  description: Whether the daemon answers after the module ran (in check mode - would answer).
  returned: always
  type: bool
servers:
  description: The MPS servers before any stop, each with its C(pid) and its C(clients) (PIDs).
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 4242, "clients": [4250, 4261]}]
default_active_thread_percentage:
  description:
    - The daemon's default active thread percentage, read back after any change (null when no daemon runs).
    - In check mode the current value, not the one O(active_thread_percentage) would set.
  returned: always
  type: float
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["started the daemon", "set_default_active_thread_percentage 50"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mps as engine


def _argument_spec():
    return dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        pipe_directory=dict(type="path", required=True),
        environment=dict(type="dict", default={}),
        control_binary=dict(type="str", default="nvidia-cuda-mps-control"),
        start=dict(type="bool", default=True),
        active_thread_percentage=dict(type="int"),
        pinned_device_mem_limit=dict(type="dict", default={}),
        stop_policy=dict(type="str", choices=list(engine.STOP_POLICIES), default="refuse"),
        drain_timeout=dict(type="int", default=600),
        poll_interval=dict(type="int", default=5),
        quit=dict(type="bool", default=True),
    )


def main():
    run_module(AnsibleModule(argument_spec=_argument_spec(), supports_check_mode=True), engine.run)


if __name__ == "__main__":
    main()
