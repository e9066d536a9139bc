# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Microsoft Entra ID authority double: the client-credentials flow azure-identity's ClientSecretCredential runs.

HTTPS only (azure-identity refuses an authority that is not), with a self-signed CA of its own in ``ca_file``
(point ``REQUESTS_CA_BUNDLE`` at it). Pass ``double.authority`` as the modules' ``authority_host``::

    with EntraDouble(arm_double) as entra:
        entra.add_application("tenant-guid", "client-guid", "the-secret")
        ...  # tokens it issues are tokens the ARM double accepts

What it serves (what MSAL asks for when instance discovery is off):

- ``GET  /{tenant}/v2.0/.well-known/openid-configuration``: the tenant's endpoints (404 for an unknown tenant,
  as Entra answers AADSTS90002 with 400);
- ``POST /{tenant}/oauth2/v2.0/token``: ``grant_type=client_credentials``; a wrong client or secret is 401
  ``invalid_client`` (AADSTS7000215 / AADSTS700016). The token is issued by the ARM double for the audience of
  the requested ``scope``.

``echo = True`` makes a refused login quote the client secret it was sent back in every form
(tests/doubles/hostile.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from ansible_collections.gpu_ops.cluster.tests.doubles.hostile import echo
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import _self_signed_certificate

_OPENID = re.compile(r"^/(?P<tenant>[^/]+)/v2\.0/\.well-known/openid-configuration$")
_TOKEN = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")


class EntraDouble:
    """See the module docstring."""

    def __init__(self, arm_double):
        self.arm = arm_double
        self.applications = {}  # (tenant, client_id) -> secret
        self.requests = []
        self.echo = False
        self.lock = threading.Lock()
        self._tmpdir = None
        self._server = None
        self.ca_file = None

    def start(self):
        self._tmpdir = tempfile.mkdtemp(prefix="entra-")
        self.ca_file = os.path.join(self._tmpdir, "ca.crt")
        key_file = os.path.join(self._tmpdir, "server.key")
        _self_signed_certificate(self.ca_file, key_file)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, key_file)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, kwargs=dict(poll_interval=0.05), daemon=True).start()
        return self

    @property
    def authority(self):
        """The authority host to give azure-identity: ``https://127.0.0.1:PORT``."""
        return "https://127.0.0.1:%d" % self._server.server_address[1]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        shutil.rmtree(self._tmpdir or "", ignore_errors=True)

    def add_application(self, tenant, client_id, secret):
        with self.lock:
            self.applications[(tenant.lower(), client_id.lower())] = secret

    def handle(self, method, raw_path, body):
        path = urlsplit(raw_path).path
        with self.lock:
            self.requests.append(dict(method=method, path=path))
        match = _OPENID.match(path)
        if match and method == "GET":
            return self._openid(match.group("tenant"))
        match = _TOKEN.match(path)
        if match and method == "POST":
            return self._token(match.group("tenant"), dict(parse_qsl(body.decode("utf-8", "replace"))))
        return 404, dict(error="not_found", error_description="no such endpoint %s %s" % (method, path))

    def _openid(self, tenant):
        with self.lock:
            known = any(t == tenant.lower() for t, dummy in self.applications)
        if not known:
            return 400, dict(error="invalid_tenant", error_description="AADSTS90002: Tenant '%s' not found." % tenant)
        base = "%s/%s" % (self.authority, tenant)
        return 200, dict(token_endpoint=base + "/oauth2/v2.0/token", issuer="%s/v2.0" % base,
                         authorization_endpoint=base + "/oauth2/v2.0/authorize",
                         device_authorization_endpoint=base + "/oauth2/v2.0/devicecode",
                         jwks_uri=base + "/discovery/v2.0/keys", tenant_region_scope="EU",
                         response_types_supported=["code", "id_token", "token"])

    def _token(self, tenant, form):
        if form.get("grant_type") != "client_credentials":
            return 400, dict(error="unsupported_grant_type", error_description="AADSTS70003: unsupported grant")
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        with self.lock:
            expected = self.applications.get((tenant.lower(), client_id.lower()))
        if expected is None:
            return 400, dict(error="unauthorized_client", error_description=(
                "AADSTS700016: Application with identifier '%s' was not found in the directory '%s'." % (client_id, tenant)))
        if secret != expected:
            detail = "AADSTS7000215: Invalid client secret provided."
            if self.echo:
                detail += " " + echo(secret)
            return 401, dict(error="invalid_client", error_description=detail, error_codes=[7000215])
        scope = form.get("scope", "").split()[0] if form.get("scope") else ""
        audience = scope[:-len("/.default")] if scope.endswith("/.default") else scope
        token, expires_on = self.arm.issue_token(audience)
        return 200, dict(token_type="Bearer", access_token=token, expires_in=3599, ext_expires_in=3599,
                         expires_on=expires_on)


def _handler_for(double):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # pylint: disable=redefined-builtin
            del format, args

        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            status, body = double.handle(self.command, self.path, self.rfile.read(length) if length else b"")
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _serve

    return Handler
