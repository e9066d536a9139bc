# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.attributes import ModuleDocFragment as Attributes
from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.attributes import compose
from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.gcp import ModuleDocFragment as Gcp
from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.session import ModuleDocFragment as Session


class ModuleDocFragment:
    """The account options of every module that talks to Azure Resource Manager (module_utils/_core/argspec.py
    AZURE_COMMON_SPEC).

    WITH_GCP is what a module for both clouds extends: both accounts, the session options and both action
    groups.
    """

    ACCOUNT = r"""
options:
  subscription_id:
    description:
      - The Azure subscription ID.
      - If not set, the environment variable E(AZURE_SUBSCRIPTION_ID) (set by the AWX/AAP C(Microsoft Azure Resource Manager) credential).
    type: str
    required: true
  cloud:
    description:
      - The Azure cloud. Selects the ARM endpoint and the token audience.
      - V(AzureCloud), V(AzureChinaCloud) and V(AzureUSGovernment), the names AWX/AAP and the Azure CLI use,
        are the same as V(public), V(china) and V(usgovernment).
      - If not set, the environment variable E(AZURE_CLOUD_ENVIRONMENT).
    type: str
    choices: [public, china, usgovernment, AzureCloud, AzureChinaCloud, AzureUSGovernment]
    default: public
  arm_endpoint:
    description:
      - Base URL of Azure Resource Manager, overriding O(cloud), for private endpoints and tests.
    type: str
  tenant_id:
    description:
      - Tenant for a service principal. With O(client_id) and O(client_secret) a client-secret credential is used;
        otherwise the azure-identity default credential chain (environment, workload identity, managed identity, Azure CLI).
      - White space around it is stripped; a control character inside it is refused.
      - If not set, the environment variable E(AZURE_TENANT) (set by the AWX/AAP credential), then E(AZURE_TENANT_ID).
    type: str
  client_id:
    description:
      - Service principal (application) ID, or the client ID of a user-assigned managed identity.
      - White space around it is stripped; a control character inside it is refused.
      - If not set, the environment variable E(AZURE_CLIENT_ID).
    type: str
  client_secret:
    description:
      - Service principal secret.
      - White space around it (a trailing newline read from a file) is stripped; a control character (CR, LF, tab, ...)
        inside it is refused before anything is sent, with an error naming the option, never the value.
      - If not set, the environment variable E(AZURE_SECRET) (set by the AWX/AAP credential), then E(AZURE_CLIENT_SECRET).
    type: str
  authority_host:
    description:
      - The Microsoft Entra authority host (a host name, or an C(https://) URL) that issues tokens, overriding the
        one of O(cloud) (C(login.microsoftonline.com), C(login.chinacloudapi.cn), C(login.microsoftonline.us)), for
        private or sovereign clouds and tests. An authority given here is not checked against Microsoft's instance
        discovery.
      - A failed login is reported as a login failure at the authority host, before any ARM request.
      - If not set, the environment variable E(AZURE_AUTHORITY_HOST) (azure-identity's name).
    type: str
requirements:
  - azure-identity >= 1.17.0
  - requests
notes:
  - When the module fails because of a value set by C(module_defaults) (for the module's action group or for the
    module), the error message names the option and the C(module_defaults) entry it came from.
  - Credentials are never logged or returned. Every form of O(client_secret) and of every token obtained with it
    (raw, escaped as in a Python or JSON string, base64 standard and URL-safe with or without padding,
    URL-encoded) is masked in every message and return value of the module.
  - The module obtains its first token before its first ARM request; a failure is reported as a login failure at
    the authority host.
  - "Where an account option comes from, first match wins: the task's own argument, then C(module_defaults)
    (C(group/gpu_ops.cluster.azure)), then the environment variable named in the option, then the default.
    Empty environment variables count as unset."
  - The AWX/AAP credential's user-name form (E(AZURE_AD_USER), E(AZURE_PASSWORD)) is not supported;
    use a service principal, a managed identity or workload identity.
"""

    # module_utils/_core/argspec.py TWO_CLOUD_SPEC: O(provider), and each account option required for its own cloud only
    _PROVIDER = r"""
options:
  provider:
    description:
      - The cloud that hosts the cluster.
    type: str
    required: true
    choices: [gke, aks]
  project:
    description:
      - GKE. The Google Cloud project ID. Required with O(provider=gke).
      - If not set, the environment variable E(GCP_PROJECT), then E(GCE_PROJECT) (AWX/AAP C(Google Compute Engine) credential).
    type: str
    required: false
  subscription_id:
    description:
      - AKS. The Azure subscription ID. Required with O(provider=aks).
      - If not set, the environment variable E(AZURE_SUBSCRIPTION_ID) (AWX/AAP C(Microsoft Azure Resource Manager) credential).
    type: str
    required: false
"""


# Composed after the class: ansible-test's yamllint reads every assignment in the class body as a YAML literal.
ModuleDocFragment.WITH_GCP = compose(Gcp.ACCOUNT, ModuleDocFragment.ACCOUNT, Session.DOCUMENTATION,
                                     Attributes.ACTIONGROUP_GCP_AZURE, ModuleDocFragment._PROVIDER)
