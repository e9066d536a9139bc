# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Argument specs shared by modules; each matches a doc fragment of the same name.

The shared spec of an action group (``GCP_COMMON_SPEC`` for ``group/gpu_ops.cluster.gcp``,
``AZURE_COMMON_SPEC`` for ``group/gpu_ops.cluster.azure``) is what ``module_defaults`` of that group
may set; every member accepts all of it (tests/unit/test_action_groups.py checks meta/runtime.yml).
"""

from __future__ import annotations

import copy

GCP_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

# The options every API session takes (timeouts, retries, render mode): the one place their
# defaults are written (plugins/doc_fragments/session.py documents them).
SESSION_SPEC = dict(
    request_timeout=dict(type="int", default=60),
    operation_timeout=dict(type="int", default=3600),
    max_retries=dict(type="int", default=8),
    render_dir=dict(type="path"),
)

# Where and as whom a GCP module works (plugins/doc_fragments/gcp.py).
GCP_ACCOUNT_SPEC = dict(
    project=dict(type="str", required=True),
    auth_kind=dict(type="str", default="application", choices=["application", "serviceaccount", "accesstoken"]),
    service_account_file=dict(type="path"),
    service_account_contents=dict(type="jsonarg", no_log=True),
    access_token=dict(type="str", no_log=True),
    scopes=dict(type="list", elements="str", default=GCP_SCOPES),
    container_endpoint=dict(type="str", default="https://container.googleapis.com/"),
    compute_endpoint=dict(type="str", default="https://compute.googleapis.com/"),
)

# Where and as whom an Azure module works (plugins/doc_fragments/azure.py).
AZURE_ACCOUNT_SPEC = dict(
    subscription_id=dict(type="str", required=True),
    cloud=dict(type="str", default="public", choices=["public", "china", "usgovernment"]),
    arm_endpoint=dict(type="str"),
    tenant_id=dict(type="str"),
    client_id=dict(type="str"),
    client_secret=dict(type="str", no_log=True),
    authority_host=dict(type="str"),
)

# matches plugins/doc_fragments/gcp.py + session.py
GCP_COMMON_SPEC = dict(GCP_ACCOUNT_SPEC, **SESSION_SPEC)

# matches plugins/doc_fragments/azure.py + session.py
AZURE_COMMON_SPEC = dict(AZURE_ACCOUNT_SPEC, **SESSION_SPEC)


def with_common(common, own):
    """A module's argument spec: a deep copy of a shared spec plus the module's own options."""
    spec = copy.deepcopy(common)
    spec.update(own)
    return spec


# The defaults of the session options, for the sessions' constructors.
SESSION_DEFAULTS = dict((option, spec.get("default")) for option, spec in SESSION_SPEC.items())
