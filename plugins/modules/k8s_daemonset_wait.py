#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_daemonset_wait
short_description: Wait until a DaemonSet runs a Ready pod of its current template on every labelled node
version_added: 0.1.0
description:
  - Waits, in one task, until the DaemonSet O(namespace)/O(name) runs a Ready pod of its current pod template on every
    node whose label O(node_label) has one of O(node_values), and reports each node (C(node), C(ready), C(pod),
    C(reason)).
  - First the nodes - those given in O(nodes) that carry the label, when there are O(min_nodes) of them (and at least one),
    else they are read until O(min_nodes) are there - then the DaemonSet - the one given in O(daemonset) when it is this
    one (not in check mode), else it is read - then its pods, read until each node has a Ready pod or the O(timeout) ends.
  - A pod counts when it is Ready, not terminating, owned by the DaemonSet and runs the images of the DaemonSet's current
    template (an outdated pod of an earlier template does not count).
  - Fails with one short message naming each node that is not ready and why (the pod's phase, its containers' waiting
    reasons, a NotReady or cordoned node), or how many labelled nodes were found, or that the DaemonSet is missing.
    Before each retry it prints a C(WAITING) line saying what it waits for.
  - Reads as M(gpu_ops.cluster.k8s_objects_info) reads - in the Ansible worker, or elsewhere with
    M(kubernetes.core.k8s_info) on the target.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.k8s_reader
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: The DaemonSet's name.
    type: str
    required: true
  namespace:
    description: The DaemonSet's namespace.
    type: str
    required: true
  node_label:
    description: The node label that selects the nodes the DaemonSet must run on, e.g. C(cloud.google.com/gke-accelerator).
    type: str
    required: true
  node_values:
    description: The values of O(node_label) that select those nodes.
    type: list
    elements: str
    required: true
  min_nodes:
    description: How many labelled nodes must exist; fewer after O(timeout) fails.
    type: int
    default: 1
  timeout:
    description: Seconds to wait for the nodes, and again for the pods.
    type: int
    default: 600
  delay:
    description: Seconds between reads.
    type: int
    default: 10
  nodes:
    description:
      - Node objects the caller already read in this run (as M(kubernetes.core.k8s_info) returns them). Those that carry
        the label are used, and no node is read, when there are O(min_nodes) of them and at least one.
    type: list
    elements: dict
    default: []
  daemonset:
    description:
      - The DaemonSet object the caller just applied (what M(kubernetes.core.k8s) returned). Used instead of a read when
        its kind, name and namespace are this DaemonSet's, except in check mode (where the apply was a dry run).
    type: dict
seealso:
  - module: gpu_ops.cluster.k8s_objects_info
  - module: kubernetes.core.k8s_info
notes:
  - The roles gpudirect_installer, tcpx_installer, tcpxo_installer and nri_device_injector wait for their DaemonSets
    with it.
"""

EXAMPLES = r"""
- name: Wait for the NCCL plugin installer on every H100 node
  gpu_ops.cluster.k8s_daemonset_wait:
    name: nccl-tcpx-installer
    namespace: kube-system
    node_label: cloud.google.com/gke-accelerator
    node_values: [nvidia-h100-80gb]
    min_nodes: 2
    timeout: 600
    delay: 10
  register: installer

- name: The nodes where it is ready
  ansible.builtin.debug:
    msg: "{{ installer.nodes | selectattr('ready') | map(attribute='node') | list }}"
"""

RETURN = r"""
daemonset:
  description: The DaemonSet waited for, C(namespace/name).
  returned: success
  type: str
  sample: kube-system/nccl-tcpx-installer
nodes:
  description: One entry per labelled node, sorted by name.
  returned: success
  type: list
  elements: dict
  contains:
    node:
      description: The node's name.
      type: str
    ready:
      description: Whether a Ready pod of the current template runs on it.
      type: bool
    pod:
      description: The pod that is ready, else the first pod found on the node, else null.
      type: str
    reason:
      description: Why the node is not ready (null when it is).
      type: str
in_worker:
  description: Whether the nodes, the DaemonSet and its pods were read in the Ansible worker (else by kubernetes.core.k8s_info on the target).
  returned: always
  type: bool
in_worker_reason:
  description: Why they were not read in the worker.
  returned: when in_worker is false
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:  # pragma: no cover
    AUTH_ARG_SPEC = {}


# the wait's own options (the action plugin checks them with this spec; the connection options are kubernetes.core's)
WAIT_SPEC = dict(
    name=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    node_label=dict(type="str", required=True),
    node_values=dict(type="list", elements="str", required=True),
    min_nodes=dict(type="int", default=1),
    timeout=dict(type="int", default=600),
    delay=dict(type="int", default=10),
    nodes=dict(type="list", elements="dict", default=[]),
    daemonset=dict(type="dict"),
)


def main():
    spec = dict(AUTH_ARG_SPEC)
    spec.update(WAIT_SPEC)
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="gpu_ops.cluster.k8s_daemonset_wait runs through its action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
