# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.attributes import ModuleDocFragment as Attributes
from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.attributes import compose
from ansible_collections.gpu_ops.cluster.plugins.doc_fragments.session import ModuleDocFragment as Session


class ModuleDocFragment:
    """What every module that talks to Google Cloud extends: the account options (module_utils/_core/argspec.py
    GCP_COMMON_SPEC), the session options and the gcp action group."""

    ACCOUNT = r"""
options:
  project:
    description:
      - The Google Cloud project ID.
      - If not set, the environment variable E(GCP_PROJECT), then E(GCE_PROJECT) (both set by the AWX/AAP
        C(Google Compute Engine) credential).
    type: str
    required: true
  auth_kind:
    description:
      - How to obtain credentials.
      - V(application) uses Application Default Credentials (C(GOOGLE_APPLICATION_CREDENTIALS), gcloud ADC, or the metadata server).
      - V(serviceaccount) reads a service-account key from O(service_account_file) or O(service_account_contents).
      - V(accesstoken) uses O(access_token) as an OAuth2 bearer token.
      - Ignored in render mode (O(render_dir)), which needs no credentials.
      - If not set, the environment variable E(GCP_AUTH_KIND) (V(serviceaccount) from the AWX/AAP C(Google Compute Engine) credential).
    type: str
    choices: [application, serviceaccount, accesstoken]
    default: application
  service_account_file:
    description:
      - Path to a service-account JSON key. Used with O(auth_kind=serviceaccount).
      - A path that begins or ends with white space, or holds a control character, is refused (not guessed at).
        The key it holds is checked as O(service_account_contents) is.
      - If not set, the environment variable E(GCP_SERVICE_ACCOUNT_FILE), then E(GCE_CREDENTIALS_FILE_PATH)
        (both set by the AWX/AAP C(Google Compute Engine) credential).
    type: path
  service_account_contents:
    description:
      - The contents of a service-account JSON key. Used with O(auth_kind=serviceaccount).
      - Must be a JSON object of type C(service_account) with C(client_email), C(private_key) and C(token_uri).
        White space around the JSON and around C(client_email), C(token_uri), C(private_key_id), C(client_id) and
        C(project_id) is stripped; a control character inside one of those, or one other than a line break in
        C(private_key), is refused with an error naming the option and the field, never the value.
      - Give it as the JSON text (for example C(lookup('ansible.builtin.file', 'key.json')), which stays a string).
        Given as a mapping, Ansible masks every value in it (the project id, the client e-mail, C(googleapis.com))
        wherever it appears in the task's result, before the module runs, so returned links and names show
        C(********) in their place. No secret is shown either way; O(service_account_file) avoids the question.
      - If not set, the environment variable E(GCP_SERVICE_ACCOUNT_CONTENTS).
    type: jsonarg
  access_token:
    description:
      - An OAuth2 access token. Used with O(auth_kind=accesstoken).
      - White space around the token (a trailing newline read from a file) is stripped. A token with a control
        character (CR, LF, tab, ...), white space or any other character outside RFC 6750's token68 inside it is
        refused before anything is sent, with an error naming the option, never the value.
      - An access token cannot be refreshed; when the API answers 401 the error says that the token has expired or
        is not valid.
      - If not set, the environment variable E(GCP_ACCESS_TOKEN).
    type: str
  scopes:
    description:
      - OAuth2 scopes requested for the credentials.
      - If not set, the environment variable E(GCP_SCOPES) (comma-separated).
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
  - "Where an account option comes from, first match wins: the task's own argument, then C(module_defaults)
    (C(group/gpu_ops.cluster.gcp)), then the environment variable named in the option, then the default.
    Empty environment variables count as unset."
  - Requests that fail with HTTP 429, 500, 502, 503, 504 or a connection reset are retried with jittered exponential backoff, honouring C(Retry-After).
  - When the module fails because of a value set by C(module_defaults) (for the module's action group or for the
    module), the error message names the option and the C(module_defaults) entry it came from.
  - Credentials are never logged or returned. Every form of every credential (raw, escaped as in a Python or
    JSON string, base64 standard and URL-safe with or without padding, URL-encoded), and every token obtained
    with them, is masked in every message and return value of the module.
  - With O(auth_kind=serviceaccount) or O(auth_kind=application) the module obtains a token before its first API
    request; a failure is reported as a login failure at the key's C(token_uri) (or the ADC source).
"""


# Composed after the class: ansible-test's yamllint reads every assignment in the class body as a YAML literal.
ModuleDocFragment.DOCUMENTATION = compose(ModuleDocFragment.ACCOUNT, Session.DOCUMENTATION, Attributes.ACTIONGROUP_GCP)
