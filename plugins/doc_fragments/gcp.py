# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Options shared by every module that talks to Google Cloud (see module_utils/_args.py)."""

    DOCUMENTATION = r"""
options:
  project:
    description:
      - The Google Cloud project ID.
    type: str
    required: true
  auth_kind:
    description:
      - How to obtain credentials.
      - V(application) uses Application Default Credentials (C(GOOGLE_APPLICATION_CREDENTIALS), gcloud ADC, or the metadata server).
      - V(serviceaccount) reads a service-account key from O(service_account_file) or O(service_account_contents).
      - V(accesstoken) uses O(access_token) as an OAuth2 bearer token.
      - Ignored in render mode (O(render_dir)), which needs no credentials.
    type: str
    choices: [application, serviceaccount, accesstoken]
    default: application
  service_account_file:
    description:
      - Path to a service-account JSON key. Used with O(auth_kind=serviceaccount).
    type: path
  service_account_contents:
    description:
      - The contents of a service-account JSON key. Used with O(auth_kind=serviceaccount).
    type: jsonarg
  access_token:
    description:
      - An OAuth2 access token. Used with O(auth_kind=accesstoken).
    type: str
  scopes:
    description:
      - OAuth2 scopes requested for the credentials.
    type: list
    elements: str
    default: ['https://www.googleapis.com/auth/cloud-platform']
  container_endpoint:
    description:
      - Base URL of the GKE API, for private endpoints and tests.
    type: str
    default: https://container.googleapis.com/
  compute_endpoint:
    description:
      - Base URL of the Compute Engine API, for private endpoints and tests.
    type: str
    default: https://compute.googleapis.com/
requirements:
  - google-auth >= 2.30.0
  - requests
notes:
  - Requests that fail with HTTP 429, 500, 502, 503, 504 or a connection reset are retried with jittered exponential backoff, honouring C(Retry-After).
  - Credentials are never logged or returned.
"""
