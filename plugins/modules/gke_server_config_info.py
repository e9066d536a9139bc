#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gke_server_config_info
short_description: GKE versions and image types a location offers, and which versions a GPUDirect profile accepts
version_added: 0.1.0
description:
  - Reads the GKE server config of a zone or region (C(gcloud container get-server-config)) and returns the offered
    control-plane and node versions (newest first), the release channels and the image types.
  - With O(gpudirect), also the offered control-plane versions that meet the profile's minimum GKE version (the
    table of the collection's GPUDirect catalog, the same one M(gpu_ops.cluster.gke_cluster) checks).
  - Reads only; nothing changes. Render mode (O(render_dir)) reads nothing, so the module fails there.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.gcp
options:
  location:
    description:
      - Zone (for example C(us-central1-c)) or region (for example C(us-central1)).
    type: str
    required: true
  gpudirect:
    description:
      - GPUDirect profile whose minimum GKE versions are applied to the offered versions.
    type: str
    choices: [tcpx, tcpxo]
seealso:
  - module: gpu_ops.cluster.gke_cluster
"""

EXAMPLES = r"""
- name: Versions offered in us-central1 that GPUDirect-TCPXO accepts
  gpu_ops.cluster.gke_server_config_info:
    project: my-project
    location: us-central1
    gpudirect: tcpxo
  register: offered

- name: Pin the newest one
  gpu_ops.cluster.gke_cluster:
    project: my-project
    location: us-central1
    name: a3mega
    gpudirect: tcpxo
    cluster_version: "{{ offered.gpudirect.latest }}"
"""

RETURN = r"""
default_cluster_version:
  description: The version GKE gives a new cluster without a pinned one.
  returned: always
  type: str
  sample: 1.32.2-gke.1489001
valid_master_versions:
  description: Control-plane versions offered without a release channel, newest first.
  returned: always
  type: list
  elements: str
valid_node_versions:
  description: Node versions offered, newest first.
  returned: always
  type: list
  elements: str
default_image_type:
  description: The default node image type.
  returned: always
  type: str
valid_image_types:
  description: Node image types offered.
  returned: always
  type: list
  elements: str
channels:
  description: Per release channel (C(RAPID), C(REGULAR), C(STABLE), C(EXTENDED)) its C(default_version) and C(valid_versions), newest first.
  returned: always
  type: dict
  sample: {"REGULAR": {"default_version": "1.31.1-gke.2008000", "valid_versions": ["1.31.1-gke.2008000"]}}
gpudirect:
  description: The O(gpudirect) profile, the offered control-plane versions that meet its minimum (C(versions), newest
    first) and the newest of them (C(latest), null when none does).
  returned: when O(gpudirect) is set
  type: dict
  sample: {"profile": "tcpxo", "versions": ["1.32.2-gke.1489001"], "latest": "1.32.2-gke.1489001"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_COMMON_SPEC, with_common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import versions as engine


def argument_spec():
    return with_common(GCP_COMMON_SPEC, dict(
        location=dict(type="str", required=True),
        gpudirect=dict(type="str", choices=["tcpx", "tcpxo"]),
    ))


def main():
    run_module(AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True), engine.run)


if __name__ == "__main__":
    main()
