#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gke_multinetwork
short_description: The GPU-NIC network fabric of one GKE cluster (GPUDirect-TCPX/TCPXO/RDMA)
version_added: 0.1.0
description:
  - Creates, checks and deletes the extra networks that the GPU NICs of A3 High (GPUDirect-TCPX, 4 NICs) and A3 Mega
    (GPUDirect-TCPXO, 8 NICs) nodes attach to. For each GPU NIC it manages one custom-mode VPC network, one subnet in
    the region of O(location) and one ingress firewall rule that allows tcp, udp and icmp.
  - For the GPUDirect-RDMA profiles (V(rdma) for A3 Ultra and A4 with 8 RDMA NICs, V(rdma-a4x) for A4X with 4) it manages
    one extra gVNIC VPC (one subnet, one internal firewall rule) and one RoCE VPC created with the C(networkProfile) of
    O(zone) (C(<zone>-vpc-roce)), holding one subnet per RDMA NIC, MTU 8896 by default. The RoCE VPC gets no firewall
    rule (RoCE VPC networks accept only regional network firewall policies and allow all traffic by implied rules).
    Before the first create the module reads the network profile and refuses one that does not exist, is restricted
    to another zone, or does not take MRDMA NICs. Names derive from O(name_prefix) (C(<prefix>-gvnic),
    C(<prefix>-rdma), C(<prefix>-rdma-sub-<i>)); the Kubernetes networks are C(gvnic-1) (C(NetDevice)) and
    C(rdma-0) ... (C(RDMA)); O(networks) is refused with these profiles.
  - The number of NICs comes from O(gpudirect) (the collection's GPUDirect catalog), O(nic_count), or the length of
    O(networks). Names are derived from O(name_prefix) unless O(networks) gives them.
  - Subnet ranges are taken one after the other from O(cidr_base) in blocks of O(subnet_prefix_length), or given per
    network in O(networks[].cidr). Malformed and overlapping ranges are refused before any request.
  - Independent operations run concurrently. All networks are created together; each network's subnet and firewall
    rule are created together as soon as the network exists, so the whole fabric takes about two operation
    latencies. O(state=absent) deletes firewall rules and subnets first, then the networks.
  - Drift is reported in RV(drift). What the API can change in place is fixed (a network's MTU, a firewall rule's
    sources, protocols, tags or disabled flag, a subnet range that only grows, through C(expandIpCidrRange)).
    Anything else (a range that would shrink or move, a subnet or rule in another network, an auto-mode network)
    fails before any change, naming the resource and the field.
  - The result carries everything later steps need, so that none of them re-derives a name. The C(Network) and
    C(GKENetworkParamSet) objects for the cluster (RV(manifests)), the node pool's additional node networks
    (RV(additional_node_networks)), and the pod annotations (RV(pod_annotations)).
  - Running the module again with the same options sends no change, and each resource is read once (3 reads per
    GPU NIC, nothing else; for RDMA N + 4 reads - the gVNIC network, subnet and rule, the RoCE network and its N
    subnets).
  - A run that will change something first reads the region (and the zone, when O(location) is one) once each, and
    refuses a region or zone that does not exist before the first write. A run that creates part of an RDMA fabric
    also reads the zone's network profile once. When a create is refused as invalid (an
    HTTP 4xx other than 401, 403, 409 and 429) after this run created other resources, those are deleted again and
    RV(rolled_back) names them; an operation that fails after its request was accepted (quota, capacity) keeps what
    was created, so that a re-run converges.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
  - gpu_ops.cluster.gcp
  - gpu_ops.cluster.gke_multinetwork
  - gpu_ops.cluster.input_check
options:
  location:
    description:
      - Where the cluster runs, as in M(gpu_ops.cluster.gke_cluster) and M(gpu_ops.cluster.gpu_nodepool), a region (for
        example C(us-central1)) or a zone (for example C(us-central1-c)). The subnets are created in that region (of
        a zone, its region).
    type: str
    required: true
  state:
    description:
      - Whether the fabric should exist.
    type: str
    choices: [present, absent]
    default: present
  gpudirect:
    description:
      - The GPUDirect profile, named as in M(gpu_ops.cluster.gke_cluster) and M(gpu_ops.cluster.gpu_nodepool).
        V(tcpx) (A3 High) has 4 GPU NICs and V(tcpxo) (A3 Mega) has 8, V(rdma) (A3 Ultra, A4) 8 RDMA NICs and
        V(rdma-a4x) (A4X) 4, as the collection's GPUDirect catalog says. It also sets the fabric's layout, the
        GKENetworkParamSet C(deviceMode) and the pod interface names.
    type: str
    choices: [tcpx, tcpxo, rdma, rdma-a4x]
  mtu:
    description:
      - MTU of the networks, 1300 to 8896. When unset, the GPUDirect catalog's MTU of the profile is used (8244 for
        TCPX/TCPXO and without O(gpudirect), 8896 for RDMA).
    type: int
  cidr_base:
    description:
      - The range that subnet ranges are allocated from, in order.
    type: str
    default: 192.168.0.0/16
  subnet_prefix_length:
    description:
      - Prefix length of each allocated subnet range, 8 to 29.
    type: int
    default: 24
  firewall_source_ranges:
    description:
      - Source ranges of every firewall rule.
      - By default each rule admits only its own network's subnet range, the only addresses that exist in that VPC.
      - A range of C(/0), such as C(0.0.0.0/0), is refused unless O(firewall_allow_any_source=true).
    type: list
    elements: str
  firewall_allow_any_source:
    description:
      - Allow the firewall rules to admit every source address. Without O(firewall_source_ranges) the rules then
        use C(0.0.0.0/0).
    type: bool
    default: false
  concurrency:
    description:
      - How many operations may be in flight at once. V(1) creates the resources one after the other.
      - Between V(1) and V(24) (every resource of the largest fabric, 3 x 8 NICs, at once).
    type: int
    default: 16
notes:
  - A network's MTU can be changed in place, but nodes attached to it keep the old MTU until they are re-created.
    The module warns when it patches one.
  - Only the resources named by the options are managed. Lowering the NIC count does not delete the networks that
    are no longer named.
seealso:
  - module: gpu_ops.cluster.gke_cluster
  - module: gpu_ops.cluster.gpu_nodepool
"""

EXAMPLES = r"""
- name: GPU NIC fabric for an A3 Mega cluster (8 VPCs, MTU 8244, 192.168.0.0/24 ... 192.168.7.0/24)
  gpu_ops.cluster.gke_multinetwork:
    project: my-project
    cluster: a3mega
    location: us-central1
    gpudirect: tcpxo
  register: fabric

- name: Network objects for the cluster
  ansible.builtin.include_role:
    name: gpu_ops.cluster.apply
    tasks_from: manifests
  vars:
    apply_step: 20-gpu-networks
    apply_manifests: "{{ fabric.manifests }}"

- name: Explicit ranges and names for an A3 High cluster
  gpu_ops.cluster.gke_multinetwork:
    project: my-project
    cluster: a3high
    location: europe-west4
    gpudirect: tcpx
    name_prefix: a3high-gpu
    networks:
      - cidr: 10.10.0.0/20
      - cidr: 10.10.16.0/20
      - cidr: 10.10.32.0/20
      - cidr: 10.10.48.0/20

- name: GPU NIC fabric for an A4X cluster (gVNIC VPC + RoCE VPC with 4 subnets, MTU 8896)
  gpu_ops.cluster.gke_multinetwork:
    project: my-project
    cluster: a4x
    location: us-central1
    zone: us-central1-b
    gpudirect: rdma-a4x

- name: Tear the fabric down (firewall rules and subnets first, then networks)
  gpu_ops.cluster.gke_multinetwork:
    project: my-project
    cluster: a3mega
    location: us-central1
    gpudirect: tcpxo
    state: absent
"""

RETURN = r"""
problems:
  description:
    - With O(validate_only), every problem of the options, one line each (the option, a colon, the problem); empty when the options
      are valid. Nothing was sent.
    - With valid options, the fabric's names (RV(gpudirect) to RV(pod_annotations), RV(state)) come with it, as a
      converge would return them.
  returned: with O(validate_only)
  type: list
  elements: str
  sample: ["subnet_prefix_length: /20 is larger than cidr_base 10.0.0.0/24"]
changes:
  description: What was (or, in check mode, would be) done, in plan order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create", "kind": "network", "name": "a3mega-gpunic-1"}]
drift:
  description:
    - Differences between existing resources and the options. C(fixable) says whether the module corrects it in
      place.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "firewall", "name": "a3mega-gpunic-1-internal", "field": "sourceRanges",
            "current": ["0.0.0.0/0"], "desired": ["192.168.0.0/24"], "fixable": true}]
rolled_back:
  description:
    - On failure, the resources this run created and deleted again because a later create was refused as invalid
      (C(kind name)). Empty when nothing was rolled back.
  returned: failure
  type: list
  elements: str
  sample: ["subnetwork a3mega-gpunic-1-sub", "network a3mega-gpunic-1"]
gpudirect:
  description: The GPUDirect profile, or null.
  returned: always
  type: str
  sample: tcpxo
region:
  description: The region of the subnets (of O(location)).
  returned: always
  type: str
  sample: us-central1
zone:
  description: The zone of the RoCE VPC (RDMA profiles), else null.
  returned: always
  type: str
  sample: us-central1-b
network_profile:
  description: The network profile the RoCE VPC is created with (RDMA profiles), else null.
  returned: always
  type: str
  sample: us-central1-b-vpc-roce
device_mode:
  description: The C(deviceMode) of the GKENetworkParamSet objects.
  returned: always
  type: str
  sample: NetDevice
networks:
  description: One entry per GPU NIC, with every name, range and MTU.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 1, "network": "a3mega-gpunic-1", "subnetwork": "a3mega-gpunic-1-sub",
            "firewall": "a3mega-gpunic-1-internal", "cidr": "192.168.0.0/24", "mtu": 8244, "k8s_network": "vpc1",
            "interface": "eth1", "source_ranges": ["192.168.0.0/24"]}]
additional_node_networks:
  description: The node pool's additional node networks, as the GKE API and M(gpu_ops.cluster.gpu_nodepool) want them.
  returned: always
  type: list
  elements: dict
  sample: [{"network": "a3mega-gpunic-1", "subnetwork": "a3mega-gpunic-1-sub"}]
k8s_network_names:
  description: Names of the Kubernetes C(Network) objects, in NIC order.
  returned: always
  type: list
  elements: str
  sample: [vpc1, vpc2, vpc3, vpc4]
manifests:
  description:
    - The C(networking.gke.io/v1) C(GKENetworkParamSet) and C(Network) objects, in apply order (each parameter set
      before its Network).
  returned: always
  type: list
  elements: dict
pod_interfaces:
  description: The pod's interfaces, C(eth0) on the default network, then one per GPU NIC.
  returned: always
  type: list
  elements: dict
  sample: [{"interfaceName": "eth0", "network": "default"}, {"interfaceName": "eth1", "network": "vpc1"}]
pod_interfaces_annotation:
  description: The value of the C(networking.gke.io/interfaces) pod annotation (JSON text).
  returned: always
  type: str
pod_annotations:
  description: The multi-network pod annotations (C(networking.gke.io/default-interface) and
    C(networking.gke.io/interfaces)).
  returned: always
  type: dict
state:
  description: The state that was asked for.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_COMMON_SPEC, INPUT_CHECK_SPEC, with_common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork as engine


def argument_spec():
    return with_common(dict(GCP_COMMON_SPEC, **INPUT_CHECK_SPEC), dict(
        engine.NAMING_SPEC,
        location=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        gpudirect=dict(type="str", choices=["tcpx", "tcpxo", "rdma", "rdma-a4x"]),
        mtu=dict(type="int"),
        cidr_base=dict(type="str", default="192.168.0.0/16"),
        subnet_prefix_length=dict(type="int", default=24),
        firewall_source_ranges=dict(type="list", elements="str"),
        firewall_allow_any_source=dict(type="bool", default=False),
        concurrency=dict(type="int", default=16),
    ))


def module_kwargs():
    """The AnsibleModule arguments; the action plugin checks O(validate_only) runs against them in the controller."""
    return dict(argument_spec=argument_spec(), supports_check_mode=True)


def engine_for(params):
    """The engine of a run with these (validated) options."""
    return engine


def main():
    module = AnsibleModule(**module_kwargs())
    run_module(module, engine_for(module.params).run)


if __name__ == "__main__":
    main()
