# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A Kubernetes exec credential plugin for GKE, run with Ansible's own Python: no gke-gcloud-auth-plugin.

The kubeconfig the ``gke_gpu_cluster`` role writes names this file as its user's ``exec`` command::

    command: <ansible_playbook_python>
    args: [-m, ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.exec_credential, ...]
    env: [{name: PYTHONPATH, value: <the folder holding ansible_collections/>}]

The client (client-go, the Kubernetes Python client that kubernetes.core uses) runs it whenever it needs
a token and reads an ``ExecCredential`` (``client.authentication.k8s.io/v1beta1`` or ``v1``, the version
the client asks for in ``KUBERNETES_EXEC_INFO``) from stdout: a Google OAuth 2.0 access token and its
``expirationTimestamp``, after which the client runs the plugin again. Nothing is written to disk.

Credentials are resolved as the GCP modules resolve theirs, through the same code: the arguments
``--auth-kind`` and ``--service-account-file`` (what the kubeconfig may hold: no secret), else the
environment variables of ``_core/argspec.py``'s ``GCP_ACCOUNT_SPEC`` (``GCP_AUTH_KIND``,
``GCP_SERVICE_ACCOUNT_FILE``/``GCE_CREDENTIALS_FILE_PATH``, ``GCP_SERVICE_ACCOUNT_CONTENTS``,
``GCP_ACCESS_TOKEN``, ``GCP_SCOPES``: what AWX's Google Compute Engine credential injects), else its
defaults (Application Default Credentials); ``_gcp/session.py``'s ``google_credentials`` and ``refresh``
turn them into a token. A failure exits 1 with one line on stderr that carries no secret.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_ACCOUNT_SPEC
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import CredentialsError, Secrets, scrub
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import google_credentials, refresh

MODULE = "ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.exec_credential"
API_VERSIONS = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1")
ACCOUNT_OPTIONS = ("auth_kind", "service_account_file", "service_account_contents", "access_token", "scopes")


def account(arguments, environ):
    """The account options: an argument, else the first environment variable GCP_ACCOUNT_SPEC names that is
    set and not empty (as the modules' fallback), else the spec's default."""
    options = {}
    for name in ACCOUNT_OPTIONS:
        spec = GCP_ACCOUNT_SPEC[name]
        value = arguments.get(name)
        if not value:
            value = next((environ[var] for var in spec.get("fallback", (None, []))[1] if environ.get(var)), None)
        if value is None:
            value = spec.get("default")
        if spec.get("type") == "list" and isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        options[name] = value
    return options


def api_version(environ):
    """The ExecCredential version the client asks for (KUBERNETES_EXEC_INFO), v1beta1 when it does not say."""
    try:
        asked = json.loads(environ.get("KUBERNETES_EXEC_INFO") or "{}").get("apiVersion")
    except (ValueError, AttributeError):
        asked = None
    return asked if asked in API_VERSIONS else API_VERSIONS[0]


def exec_credential(options, version, secrets):
    """The ExecCredential for ``options`` (account options as ``account`` returns them)."""
    credentials, token_uri = google_credentials(options["auth_kind"], options["service_account_file"],
                                                options["service_account_contents"], options["access_token"],
                                                options["scopes"], secrets)
    refresh(credentials, options["auth_kind"], token_uri, secrets)
    status = {"token": credentials.token}
    expiry = getattr(credentials, "expiry", None)
    if isinstance(expiry, datetime.datetime):
        # google-auth keeps a naive UTC time
        status["expirationTimestamp"] = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": version, "kind": "ExecCredential", "status": status}


def main(argv=None, environ=None, stdout=None, stderr=None):
    """Print the ExecCredential; 0, or 1 with a one-line error (no secret) on stderr."""
    environ = os.environ if environ is None else environ
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m " + MODULE, description=__doc__.split("\n", 1)[0])
    parser.add_argument("--auth-kind", dest="auth_kind", choices=GCP_ACCOUNT_SPEC["auth_kind"]["choices"])
    parser.add_argument("--service-account-file", dest="service_account_file")
    arguments = vars(parser.parse_args(argv))
    secrets = Secrets()
    options = account(arguments, environ)
    for name in ("service_account_contents", "access_token"):
        secrets.add(options[name])
    try:
        document = exec_credential(options, api_version(environ), secrets)
    except CredentialsError as exc:
        stderr.write("gpu_ops.cluster exec credential: %s\n" % scrub(str(exc), secrets))
        return 1
    stdout.write(json.dumps(document) + "\n")
    return 0


if __name__ == "__main__":
    # a client-go exec plugin, not an Ansible module: its exit status is what the client reads
    raise SystemExit(main())
