# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Options shared by every module that talks to Azure Resource Manager (see module_utils/_args.py)."""

    DOCUMENTATION = r"""
options:
  subscription_id:
    description:
      - The Azure subscription ID.
    type: str
    required: true
  cloud:
    description:
      - The Azure cloud. Selects the ARM endpoint and the token audience.
    type: str
    choices: [public, china, usgovernment]
    default: public
  arm_endpoint:
    description:
      - Base URL of Azure Resource Manager, overriding O(cloud), for private endpoints and tests.
    type: str
  tenant_id:
    description:
      - Tenant for a service principal. With O(client_id) and O(client_secret) a client-secret credential is used;
        otherwise the azure-identity default credential chain (environment, workload identity, managed identity, Azure CLI).
    type: str
  client_id:
    description:
      - Service principal (application) ID, or the client ID of a user-assigned managed identity.
    type: str
  client_secret:
    description:
      - Service principal secret.
    type: str
requirements:
  - azure-identity >= 1.17.0
  - requests
notes:
  - Credentials are never logged or returned.
"""
