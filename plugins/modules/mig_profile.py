#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mig_profile
short_description: Declarative MIG geometry of the GPUs of a host, applied through nvidia-smi
version_added: 0.1.0
description:
  - Makes the MIG GPU instances and compute instances of a host's GPUs match a desired geometry, per GPU (by index,
    UUID or V(all)) - a list of profiles such as V([3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]) or a named layout
    (V(all-disabled), V(all-enabled), V(all-1g.10gb), V(all-balanced), ...), with optional compute-instance splits.
  - Before anything is written, checks the request against the collection's MIG catalog narrowed to the profiles the
    host's driver lists (C(nvidia-smi mig -lgip)) and the placement rules the host reports (C(nvidia-smi mig
    -lgipp)); while MIG mode is still off the catalog's rules are used and the host's are read once MIG is on. A
    layout that does not fit is refused with the reason and the nearest layout that fits, naming the GPU and the
    profile.
  - Keeps the instances that already match, destroys only the ones that differ, and creates the new ones at explicit
    placements (C(-cgi <profile>:<start>)), largest first, so that creation never depends on the driver's choice of
    slot. Re-running with the same geometry changes nothing.
  - Instances are never removed or re-split on a GPU that runs compute processes, because nvidia-smi names the GPU
    of a process, not its MIG device. The module then fails naming the GPU, the instances and the processes, and
    changes nothing on any GPU, also in check mode. Adding instances beside running work is allowed.
  - Enabling or disabling MIG mode may need a GPU reset. The module resets a GPU only with O(allow_reset=true) and no
    process on it; otherwise the mode stays pending, the module returns C(reboot_required) with the processes in the
    way, and creates the instances on the next run after the reboot.
  - Returns the MIG device UUIDs, the resulting geometry, and the geometry as a mig-parted config so the same layout
    can be handed to nvidia-mig-parted or the GPU Operator's MIG manager.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
attributes:
  check_mode:
    details:
      - Reads the host with nvidia-smi and returns the instance-level plan without writing.
  diff_mode:
    details:
      - One entry per MIG mode change and per GPU instance created, destroyed or re-split.
options:
  gpus:
    description:
      - The desired geometry, one entry per GPU selector. An entry for an index or a UUID wins over an V(all) entry.
    type: list
    elements: dict
    required: true
    suboptions:
      gpu:
        description:
          - V(all), a GPU index (V(0)) or a GPU UUID (V(GPU-...)) as C(nvidia-smi -L) prints it.
        type: str
        required: true
      profiles:
        description:
          - The GPU instances, as profile names of the GPU's model (V(3g.40gb)); an empty list enables MIG with no
            instance.
          - An item may pin its start slot as V(3g.40gb@4).
          - An item may be a dict with C(profile) and C(compute_instances), for example
            C(profile=3g.40gb compute_instances=[1, 2]), to split the GPU instance into compute instances of that many
            compute slices each (V(1), V(2), V(3), V(4) or V(7)); by default one compute instance spans the GPU
            instance.
          - Mutually exclusive with O(gpus[].layout).
        type: list
        elements: raw
      layout:
        description:
          - A named layout of the GPU's model, as mig-parted and the GPU Operator name them - V(all-disabled) (or
            V(disabled)) turns MIG off, V(all-enabled) turns it on with no instance, V(all-<profile>) (for example
            V(all-1g.10gb)) is that profile at its maximum count, V(all-balanced) the model's balanced mix.
        type: str
  allow_reset:
    description:
      - Allow C(nvidia-smi -r) when a MIG mode change stays pending. A GPU with processes is never reset.
    type: bool
    default: false
  nvidia_smi:
    description:
      - Path of nvidia-smi. Searched on E(PATH) and in the usual system folders when omitted.
    type: path
  offline:
    description:
      - Render mode - plan for O(offline.count) GPUs of O(offline.model) with MIG off, from the catalog alone, without
        nvidia-smi and without changing anything. Returns the plan, the predicted geometry and RV(mig_parted_config).
    type: dict
    suboptions:
      model:
        description:
          - A GPU model of the MIG catalog (V(A100-40GB), V(H100-80GB), V(H200-141GB), ...) or its nvidia-smi product
            name.
        type: str
        required: true
      count:
        description: The number of GPUs.
        type: int
        required: true
  mig_parted_config_name:
    description:
      - Name of the config in the returned RV(mig_parted_config).
    type: str
    default: custom
notes:
  - RV(mig_parted_config) counts compute instances per profile as C(nvidia-mig-parted export) does - V(3g.40gb) for a
    GPU instance with one compute instance spanning it, V(1c.3g.40gb) for each 1-slice compute instance of a 3g.40gb
    GPU instance. mig-parted does not record which GPU instance holds which compute instance, nor GPU instances without
    a compute instance; where its apply would lay the exported map out differently RV(mig_parted_differences) says
    how (and the module warns).
  - Needs root for changes (nvidia-smi's MIG commands do); reading in check mode does not.
  - Stop GPU clients (DCGM, nvsm, the device plugin, CUDA jobs) before changing the geometry of a GPU they use;
    nvidia-smi refuses to destroy an instance in use.
  - Under Kubernetes with the GPU Operator, let the MIG manager apply the geometry instead - the role
    C(gpu_ops.cluster.mig_manager) sets the C(nvidia.com/mig.config) label to a config name (for example one this module
    exports, given to the MIG manager as its ConfigMap), checks it first and waits for the MIG manager's state.
seealso:
  - module: gpu_ops.cluster.gpu_host_facts
  - plugin: gpu_ops.cluster.mig_parted_config
    plugin_type: filter
"""

EXAMPLES = r"""
- name: A 3-2-1-1 layout on every GPU
  become: true
  gpu_ops.cluster.mig_profile:
    gpus:
      - gpu: all
        profiles: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]
    allow_reset: true

- name: GPU 0 balanced, GPU 1 split into three compute instances, the others without MIG
  become: true
  gpu_ops.cluster.mig_profile:
    gpus:
      - gpu: all
        layout: all-disabled
      - gpu: "0"
        layout: all-balanced
      - gpu: "1"
        profiles:
          - profile: 3g.40gb
            compute_instances: [1, 1, 1]
          - 4g.40gb
  register: mig

- name: Show the MIG devices
  ansible.builtin.debug:
    var: mig.mig_devices
"""

RETURN = r"""
changed:
  description: Whether the geometry or a MIG mode changed (or would change in check mode).
  returned: always
  type: bool
changes:
  description: The instance-level plan - C(action) (create, delete, update), C(kind) (V(mig_mode), V(gpu_instance),
    V(compute_instances)) and C(name) (C(gpu<index>/<profile>@<start> [<compute split>])).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create", "kind": "gpu_instance", "name": "gpu0/3g.40gb@4 [3]"}]
gpus:
  description:
    - Per GPU the geometry after the run (before it in check mode) - C(index), C(uuid), C(name), C(model),
      C(mig_mode_current), C(mig_mode_pending), C(placement_rules) (V(host) or V(catalog)), C(instances) (C(profile),
      C(start), C(size), C(gpu_instance_id), C(compute_instances) with C(compute_instance_id), C(slices), C(uuid)),
      C(mig_devices) and C(processes).
  returned: always
  type: list
  elements: dict
mig_devices:
  description: UUIDs of every MIG device on the host after the run.
  returned: always
  type: list
  elements: str
  sample: ["MIG-3f6f389f-b0cb-5b3b-9e2b-2e6ce9a0f5a1"]
reboot_required:
  description: True when a MIG mode change is pending until a reset or a reboot; see RV(pending).
  returned: always
  type: bool
pending:
  description: Per GPU whose MIG mode change is pending - C(gpu), C(uuid), C(reason), C(processes) in the way.
  returned: always
  type: list
  elements: dict
mig_parted_config:
  description: The host's geometry as a mig-parted C(version v1) config (null when the GPUs are of mixed models).
  returned: always
  type: dict
mig_parted_differences:
  description:
    - Per GPU where C(nvidia-mig-parted apply) of RV(mig_parted_config) would create other GPU instances than the GPU
      has, for example two 3g GPU instances split V(2+1) and V(1) where the GPU has V(2) and V(1+1); empty when the
      config reproduces the geometry.
  returned: always
  type: list
  elements: str
nvidia_smi_writes:
  description: The nvidia-smi commands that changed the host, in order.
  returned: always
  type: list
  elements: str
  sample: ["-i 0 -mig 1", "mig -i 0 -cgi 9:4 -C"]
hardware_differences:
  description: Where the host's own MIG tables differ from the catalog (for a bug report).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mig as engine


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="dict", required=True, options=dict(
                gpu=dict(type="str", required=True),
                profiles=dict(type="list", elements="raw"),
                layout=dict(type="str"),
            ), mutually_exclusive=[("profiles", "layout")], required_one_of=[("profiles", "layout")]),
            allow_reset=dict(type="bool", default=False),
            nvidia_smi=dict(type="path"),
            mig_parted_config_name=dict(type="str", default="custom"),
            offline=dict(type="dict", options=dict(model=dict(type="str", required=True),
                                                   count=dict(type="int", required=True))),
        ),
        supports_check_mode=True,
    )
    run_module(module, engine.run)


if __name__ == "__main__":
    main()
