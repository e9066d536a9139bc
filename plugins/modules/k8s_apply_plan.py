#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply_plan
short_description: Say which kubernetes.core.k8s apply calls would only read objects that are already in place
version_added: 0.1.0
description:
  - Reads each object of O(batches) (one GET per object) and marks each call C(in_place) when every object of it is in
    place, so that the caller can skip the M(kubernetes.core.k8s) call. An object is in place only when it exists, its
    C(kubectl.kubernetes.io/last-applied-configuration) annotation (what M(kubernetes.core.k8s) C(apply=true) writes)
    equals the manifest, every field of the manifest is live with an equal value (strict types, lists of the same
    length) and, with O(wait), kubernetes.core's own readiness check already holds. Anything else is not in place.
  - Its result is its own, never shaped like M(kubernetes.core.k8s)'s - C(changed=false), the calls marked, and what
    was read. The role C(gpu_ops.cluster.apply) registers it as C(apply_result) and, when every call is in place,
    skips the include that sends the objects.
  - A read that cannot be made (not in the Ansible worker, a kubeconfig it cannot find or take, credentials, an API error)
    makes no call in place; the reason is returned, and the calls can run as before and fail, if they must, with
    kubernetes.core's own message. Only O(batches) that are not calls, and unknown options, fail the task.
  - Reads as M(gpu_ops.cluster.k8s_objects_info) reads, but in the Ansible worker only; it never runs M(kubernetes.core.k8s_info) on the target.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.k8s_reader
  - kubernetes.core.k8s_auth_options
options:
  batches:
    description:
      - The calls, as the filter P(gpu_ops.cluster.k8s_apply_batches#filter) builds them from a list of objects.
      - Each has C(definition), the list of objects the call sends, and C(wait_condition), which the readiness check
        uses with O(wait).
    type: list
    elements: dict
    required: true
  wait:
    description: Whether the calls wait for their objects; then an object is in place only when it is also ready.
    type: bool
    default: false
seealso:
  - module: gpu_ops.cluster.k8s_objects_info
  - module: kubernetes.core.k8s
notes:
  - The role gpu_ops.cluster.apply plans every live step with it (not in check mode, not for a deletion or a patch).
"""

EXAMPLES = r"""
- name: Which calls are in place
  gpu_ops.cluster.k8s_apply_plan:
    batches: "{{ objects | gpu_ops.cluster.k8s_apply_batches }}"
  register: plan

- name: Apply the calls that are not in place
  kubernetes.core.k8s:
    definition: "{{ item.definition }}"
    apply: true
  loop: "{{ plan.batches | rejectattr('in_place') }}"
  loop_control:
    label: "{{ item.label }}"
"""

RETURN = r"""
batches:
  description: O(batches), each call with C(in_place) and C(not_in_place).
  returned: success
  type: list
  elements: dict
  contains:
    in_place:
      description: Whether every object of the call is in place.
      type: bool
    not_in_place:
      description: "C(Kind/name: reason) of each object that is not (field paths, never values)."
      type: list
      elements: str
in_place:
  description: Whether every call is in place.
  returned: success
  type: bool
reads:
  description:
    - What each object's GET found, in call order, as M(gpu_ops.cluster.k8s_objects_info) returns its C(results)
      (C(query), C(resources), C(api_found) and, with O(wait), C(ready)). Empty when nothing was read.
  returned: success
  type: list
  elements: dict
changed:
  description: Always false; the plan only reads.
  returned: always
  type: bool
in_worker:
  description: Whether the objects were read in the Ansible worker.
  returned: when there is an object to read
  type: bool
in_worker_reason:
  description: Why the objects were not read (nothing is in place then).
  returned: when in_worker is false
  type: str
read_error:
  description: Why the reads failed (nothing is in place then).
  returned: when a read failed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:  # pragma: no cover
    AUTH_ARG_SPEC = {}


def main():
    spec = dict(AUTH_ARG_SPEC)
    spec.update(batches=dict(type="list", elements="dict", required=True), wait=dict(type="bool", default=False))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="gpu_ops.cluster.k8s_apply_plan runs through its action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
