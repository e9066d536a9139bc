#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_objects_info
short_description: Read several Kubernetes objects and lists in one task, as kubernetes.core.k8s_info returns them
version_added: 0.1.0
description:
  - Reads, in one task, named objects (C(api_version), C(kind), C(name), C(namespace)) and lists (C(kind) with label
    and field selectors), each as M(kubernetes.core.k8s_info) would, and returns them in the same shape (C(resources),
    C(api_found)) per query and all together.
  - Reads in the Ansible worker that runs the task when the connection is C(local), the task is not delegated, C(become)
    is not set and C(ansible_python_interpreter) is the controller's Python, through kubernetes.core's own client code;
    no module process is started. Elsewhere each query runs M(kubernetes.core.k8s_info) on the target (or, with
    O(fallback=false), nothing is read and C(in_worker) is false).
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.k8s_reader
  - kubernetes.core.k8s_auth_options
options:
  queries:
    description:
      - What to read, in order. Each is a dict with C(kind) (required), C(api_version) (default C(v1)), C(name),
        C(namespace), C(label_selectors) and C(field_selectors) (lists of strings, as for M(kubernetes.core.k8s_info)).
      - A Kubernetes manifest works too (C(apiVersion), C(kind), C(metadata.name), C(metadata.namespace)).
      - C(wait=true) adds C(ready) to the query's result - whether kubernetes.core.k8s's wait would end at once for the one
        object read - with C(wait_condition) (C(type), C(status), C(reason)) as kubernetes.core.k8s takes it, or the kind's
        own readiness check (DaemonSet, Deployment, Pod, StatefulSet; existence for other kinds). In the worker only.
    type: list
    elements: dict
    required: true
  fallback:
    description:
      - Where the task cannot run in the worker, V(true) reads each query with M(kubernetes.core.k8s_info) on the target;
        V(false) reads nothing and returns C(in_worker=false) with empty results (for a read that only saves work).
    type: bool
    default: true
seealso:
  - module: kubernetes.core.k8s_info
notes:
  - The role apply reads the objects of a step with it and skips the step's kubernetes.core.k8s call when every object is
    already in place (README.md, "Kubernetes credentials and apply").
"""

EXAMPLES = r"""
- name: Read the GPU nodes and a DaemonSet in one task
  gpu_ops.cluster.k8s_objects_info:
    queries:
      - kind: Node
        label_selectors:
          - cloud.google.com/gke-accelerator
      - api_version: apps/v1
        kind: DaemonSet
        namespace: kube-system
        name: nccl-tcpxo-installer
  register: read

- name: The nodes
  ansible.builtin.debug:
    msg: "{{ read.results[0].resources | map(attribute='metadata.name') | list }}"
"""

RETURN = r"""
resources:
  description: The objects of every query, in query order (for one query, what M(kubernetes.core.k8s_info) returns).
  returned: success
  type: list
  elements: dict
api_found:
  description: Whether the API of every query's kind was found.
  returned: success
  type: bool
results:
  description:
    - Per query its C(query) (as understood), C(resources), C(api_found) and, for C(wait=true) in the worker, C(ready).
  returned: success
  type: list
  elements: dict
in_worker:
  description: Whether the objects were read in the Ansible worker (else by kubernetes.core.k8s_info, or not at all).
  returned: always
  type: bool
in_worker_reason:
  description: Why the objects were not read in the worker.
  returned: when in_worker is false
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:  # pragma: no cover
    AUTH_ARG_SPEC = {}


def main():
    spec = dict(AUTH_ARG_SPEC)
    spec.update(queries=dict(type="list", elements="dict", required=True), fallback=dict(type="bool", default=True))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="gpu_ops.cluster.k8s_objects_info runs through its action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
