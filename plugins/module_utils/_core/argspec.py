# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Argument specs shared by modules; each matches a doc fragment of the same name.

The shared spec of an action group (``GCP_COMMON_SPEC`` for ``group/gpu_ops.cluster.gcp``,
``AZURE_COMMON_SPEC`` for ``group/gpu_ops.cluster.azure``) is what ``module_defaults`` of that group
may set; every member accepts all of it (tests/unit/test_action_groups.py checks meta/runtime.yml).

Account options fall back to the environment variables AWX/AAP's built-in credential types inject
(and the names google.cloud and azure.azcollection read), so a job template with a stock credential
needs no extra variables. Precedence: task option > module_defaults > environment > default.
"""

from __future__ import annotations

import copy
import os

from ansible.module_utils.errors import AnsibleFallbackNotFound

GCP_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

# The options every API session takes (timeouts, retries, render mode): the one place their
# defaults are written (plugins/doc_fragments/session.py documents them).
SESSION_SPEC = dict(
    request_timeout=dict(type="int", default=60),
    operation_timeout=dict(type="int", default=3600),
    max_retries=dict(type="int", default=8),
    render_dir=dict(type="path"),
)


def env_fallback_set(*names):
    """The first of the environment variables ``names`` that is set and not empty.

    Unlike Ansible's env_fallback, an empty variable counts as unset: AWX leaves optional inputs empty,
    and an empty choice would fail validation.
    """
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    raise AnsibleFallbackNotFound


def _env(*names):
    return (env_fallback_set, list(names))


# AWX's "Google Compute Engine" credential injects GCP_AUTH_KIND=serviceaccount, GCP_PROJECT,
# GCP_SERVICE_ACCOUNT_FILE and the older GCE_PROJECT, GCE_CREDENTIALS_FILE_PATH (plugins/doc_fragments/gcp.py).
GCP_ACCOUNT_SPEC = dict(
    project=dict(type="str", required=True, fallback=_env("GCP_PROJECT", "GCE_PROJECT")),
    auth_kind=dict(type="str", default="application", choices=["application", "serviceaccount", "accesstoken"],
                   fallback=_env("GCP_AUTH_KIND")),
    service_account_file=dict(type="path", fallback=_env("GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH")),
    service_account_contents=dict(type="jsonarg", no_log=True, fallback=_env("GCP_SERVICE_ACCOUNT_CONTENTS")),
    access_token=dict(type="str", no_log=True, fallback=_env("GCP_ACCESS_TOKEN")),
    scopes=dict(type="list", elements="str", default=GCP_SCOPES, fallback=_env("GCP_SCOPES")),
    container_endpoint=dict(type="str", default="https://container.googleapis.com/"),
    compute_endpoint=dict(type="str", default="https://compute.googleapis.com/"),
)

# The names AWX's AZURE_CLOUD_ENVIRONMENT (and the az CLI) give the clouds, for the option cloud.
AZURE_CLOUD_ENVIRONMENTS = {"AzureCloud": "public", "AzureChinaCloud": "china", "AzureUSGovernment": "usgovernment"}

# AWX's "Microsoft Azure Resource Manager" credential injects AZURE_SUBSCRIPTION_ID, AZURE_CLIENT_ID,
# AZURE_TENANT, AZURE_SECRET and AZURE_CLOUD_ENVIRONMENT; azure-identity's own names (AZURE_TENANT_ID,
# AZURE_CLIENT_SECRET) are read too (plugins/doc_fragments/azure.py).
AZURE_ACCOUNT_SPEC = dict(
    subscription_id=dict(type="str", required=True, fallback=_env("AZURE_SUBSCRIPTION_ID")),
    cloud=dict(type="str", default="public", choices=["public", "china", "usgovernment"] + list(AZURE_CLOUD_ENVIRONMENTS),
               fallback=_env("AZURE_CLOUD_ENVIRONMENT")),
    arm_endpoint=dict(type="str"),
    tenant_id=dict(type="str", fallback=_env("AZURE_TENANT", "AZURE_TENANT_ID")),
    client_id=dict(type="str", fallback=_env("AZURE_CLIENT_ID")),
    client_secret=dict(type="str", no_log=True, fallback=_env("AZURE_SECRET", "AZURE_CLIENT_SECRET")),
    authority_host=dict(type="str", fallback=_env("AZURE_AUTHORITY_HOST")),
)

# documented by the doc fragment input_check: the modules that change cloud resources take it
INPUT_CHECK_SPEC = dict(
    validate_only=dict(type="bool", default=False),
)

# documented by the doc fragment gcp (its ACCOUNT options plus session.py)
GCP_COMMON_SPEC = dict(GCP_ACCOUNT_SPEC, **SESSION_SPEC)

# documented by doc_fragments/azure.py ACCOUNT plus session.py
AZURE_COMMON_SPEC = dict(AZURE_ACCOUNT_SPEC, **SESSION_SPEC)


def with_common(common, own):
    """A module's argument spec: a deep copy of a shared spec plus the module's own options."""
    spec = copy.deepcopy(common)
    spec.update(copy.deepcopy(own))
    return spec


# A module for both clouds (doc fragment azure.WITH_GCP): O(provider) picks the cloud, and each cloud's
# account option is required only for that provider (PROVIDER_REQUIRED_IF, with the option that names
# where the cluster is).
TWO_CLOUD_SPEC = with_common(GCP_COMMON_SPEC, AZURE_COMMON_SPEC)
TWO_CLOUD_SPEC["project"]["required"] = False
TWO_CLOUD_SPEC["subscription_id"]["required"] = False
TWO_CLOUD_SPEC["provider"] = dict(type="str", required=True, choices=["gke", "aks"])
PROVIDER_REQUIRED_IF = [
    ("provider", "gke", ("project", "location")),
    ("provider", "aks", ("subscription_id", "resource_group")),
]

# The defaults of the session options, for the sessions' constructors.
SESSION_DEFAULTS = dict((option, spec.get("default")) for option, spec in SESSION_SPEC.items())
