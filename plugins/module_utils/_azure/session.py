# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The Azure Resource Manager session every Azure module of this collection uses.

``ArmSession`` holds the credential (azure-identity), the ARM endpoint of the chosen cloud, an
``_core.transport.HttpClient`` (the one retry loop, which honours ``Retry-After``) and the long-running
operation waiter. ARM reports a long-running operation in one of three ways, tried in this order:

1. an ``Azure-AsyncOperation`` header: an operation-status URL that answers
   ``{"status": "InProgress" | "Succeeded" | "Failed" | "Canceled", "error": {...}}``;
2. a ``Location`` header: a URL that answers 202 while the operation runs and 200/201/204 when it
   is done;
3. neither: the resource's own ``properties.provisioningState``, read until it is terminal.

Between polls the waiter sleeps for the server's ``Retry-After`` (or a default interval). A
``Failed`` or ``Canceled`` operation raises ``LroError`` naming the request and the error code and
message.

In render mode (``render_dir``) no credential is created: the HTTP session is an
``_core.transport.RenderSession`` that records every write under ``<render_dir>/requests/`` and answers it
with the written resource in provisioning state ``Succeeded``.

Tokens are sent in the ``Authorization`` header only; nothing here logs headers, and error
messages are scrubbed of the client secret and of anything shaped like a bearer token.
"""

from __future__ import annotations

import collections
import copy
import logging
import threading
import time

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import (
    AZURE_CLOUD_ENVIRONMENTS, SESSION_DEFAULTS,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import (
    ApiError,
    CloudSession,
    CredentialsError,
    Response,
    RenderSession,
    Secrets,
    clean_credential,
    installed,
    parse_retry_after,
    scrub,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import NOT_READ, WaitTimeout

# azure-identity (and msal, about a hundred modules) is imported when a credential is built, not here: every
# gpu_nodepool module process loads this engine, GKE runs included, and would pay for the import.
# Whether it is installed is known without importing it.
HAS_AZURE_IDENTITY, AZURE_IDENTITY_IMPORT_ERROR = installed("azure.identity")


def _azure_identity():
    """The azure.identity module, imported on first use."""
    import azure.identity  # pylint: disable=import-outside-toplevel

    return azure.identity


Cloud = collections.namedtuple("Cloud", ["arm_endpoint", "audience", "authority_host"])

# The ARM endpoint, the token audience (the scope is the audience + ".default") and the Microsoft
# Entra authority host of each Azure cloud.
CLOUDS = {
    "public": Cloud("https://management.azure.com/", "https://management.azure.com/", "login.microsoftonline.com"),
    "china": Cloud("https://management.chinacloudapi.cn/", "https://management.chinacloudapi.cn/",
                   "login.chinacloudapi.cn"),
    "usgovernment": Cloud("https://management.usgovcloudapi.net/", "https://management.usgovcloudapi.net/",
                          "login.microsoftonline.us"),
}

# ARM operation states (Azure-AsyncOperation "status" and properties.provisioningState).
SUCCEEDED = "succeeded"
FAILED_STATES = frozenset(("failed", "canceled", "cancelled"))

DEFAULT_POLL_INTERVAL = 10.0
TOKEN_REFRESH_MARGIN = 300  # seconds before expiry at which a token is renewed


class LroError(ApiError):
    """A long-running operation that ended Failed or Canceled, or did not end in time."""

    def __init__(self, method, url, state, code=None, detail=None, status=None, operation=None):
        self.state = state
        self.code = code
        self.detail = detail
        self.operation = operation
        text = "long-running operation %s" % state
        if code or detail:
            text += ": %s" % ": ".join(p for p in (code, detail) if p)
        super().__init__(status, text, method, _strip_query(url))


def _strip_query(url):
    return (url or "").split("?")[0] or None


def _header(headers, name):
    """A header value, case-insensitively (requests gives a CaseInsensitiveDict, RenderSession a dict)."""
    if not headers:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lower = name.lower()
    for key, item in headers.items():
        if key.lower() == lower:
            return item
    return None


def provisioning_state(document):
    """``properties.provisioningState`` of an ARM resource document, or None."""
    if not isinstance(document, dict):
        return None
    properties = document.get("properties")
    if isinstance(properties, dict):
        return properties.get("provisioningState")
    return None


class ArmResponse(tuple):
    """``(body, headers)`` of a write, which also remembers the request (for ``ArmSession.wait``)."""

    def __new__(cls, body, headers, method, url, status):
        self = super().__new__(cls, (body, headers))
        self.method = method
        self.url = url
        self.status = status
        return self

    @property
    def body(self):
        return self[0]

    @property
    def headers(self):
        return self[1]


class LoginError(ApiError):
    """No token from Microsoft Entra ID (azure-identity failed at the authority host): not an ARM answer."""

    def __init__(self, authority, what, detail):
        self.authority = authority
        super().__init__(None, "Azure login failed at %s (%s): %s" % (authority, what, detail))

    def describe(self):
        return self.message


class _BearerSession:
    """A requests.Session that sends an Azure bearer token, renewed before it expires.

    requests is imported when the first one is made, not with the engine: the preflight imports the engine in the
    controller to check a request's values, and a GKE run of gpu_nodepool never makes one."""

    def __init__(self, credential, scope, secrets, authority="", what="credential", clock=time.time):
        import requests  # pylint: disable=import-outside-toplevel

        self._http = requests.Session()
        self._credential = credential
        self._scope = scope
        self._secrets = secrets
        self._authority = authority
        self._what = what
        self._clock = clock
        self._token = None
        self._expires_on = 0
        self._lock = threading.Lock()

    def token(self):
        """The current token, renewed when it is close to expiry; LoginError when azure-identity fails."""
        with self._lock:
            if self._token is None or self._expires_on - self._clock() < TOKEN_REFRESH_MARGIN:
                try:
                    access = self._credential.get_token(self._scope)
                except Exception as exc:  # pylint: disable=broad-except
                    # azure-identity raises ClientAuthenticationError / CredentialUnavailableError
                    raise LoginError(self._authority, self._what, "%s for %s" % (
                        scrub("%s: %s" % (type(exc).__name__, exc), self._secrets), self._scope)) from None
                self._secrets.add(access.token)
                self._token = access.token
                self._expires_on = access.expires_on
            return self._token

    def request(self, method, url, *args, **kwargs):  # pylint: disable=arguments-differ,signature-differs
        headers = dict(kwargs.pop("headers", None) or {})
        headers["Authorization"] = "Bearer " + self.token()
        headers.setdefault("Accept", "application/json")
        return self._http.request(method, url, *args, **kwargs, headers=headers)


def authority_of(cloud, authority_host=None):
    """The Microsoft Entra authority host for ``cloud``, or ``authority_host`` when one is given."""
    if authority_host:
        host = clean_credential("authority_host", authority_host, what="the host")
        if "://" in host and not host.startswith("https://"):
            raise CredentialsError("authority_host must be a host name or an https:// URL (azure-identity sends "
                                   "credentials over TLS only), got %r" % host, option="authority_host")
        return host.rstrip("/")
    return CLOUDS[cloud].authority_host


def build_credential(cloud, tenant_id=None, client_id=None, client_secret=None, authority_host=None):
    """An azure-identity credential for ``cloud`` (at ``authority_host`` when given).

    A service principal secret when tenant_id, client_id and client_secret are all given;
    otherwise the default chain (environment, workload identity, managed identity (with
    ``client_id`` as a user-assigned identity), Azure CLI, ...).
    """
    if not HAS_AZURE_IDENTITY:
        raise CredentialsError("azure-identity is required to talk to Azure (pip install azure-identity)")
    authority = authority_of(cloud, authority_host)
    given = [n for n, v in (("tenant_id", tenant_id), ("client_id", client_id), ("client_secret", client_secret)) if v]
    if client_secret and len(given) < 3:
        raise CredentialsError("client_secret needs tenant_id and client_id as well (given: %s)" % ", ".join(given),
                               option="client_secret")
    # azure-identity logs a failed get_token, server's answer and all, at WARNING: with no handler of ours
    # Python would print it on stderr unscrubbed; our error says it, scrubbed
    for name in ("azure.identity", "msal"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False
    # an authority of one's own is not one Microsoft's instance discovery knows
    extra = dict(disable_instance_discovery=True) if authority_host else {}
    try:
        if client_secret:
            return _azure_identity().ClientSecretCredential(tenant_id, client_id, client_secret, authority=authority, **extra)
        kwargs = dict(authority=authority, **extra)
        if client_id:
            kwargs.update(managed_identity_client_id=client_id, workload_identity_client_id=client_id)
        if tenant_id:
            kwargs.update(workload_identity_tenant_id=tenant_id)
        return _azure_identity().DefaultAzureCredential(**kwargs)
    except (ValueError, TypeError) as exc:
        raise CredentialsError("could not set up the Azure credential: %s" % scrub(exc, [client_secret])) from None


def _credential_kind(tenant_id, client_id, client_secret):
    if client_secret:
        return "client secret of application %s in tenant %s" % (client_id, tenant_id)
    return "azure-identity's default credential chain"


class ArmSession(CloudSession):
    """Credential, ARM endpoint, HTTP with retries and the long-running operation waiter."""

    def __init__(self, subscription_id, cloud="public", arm_endpoint=None, tenant_id=None, client_id=None,
                 client_secret=None, request_timeout=SESSION_DEFAULTS["request_timeout"],
                 operation_timeout=SESSION_DEFAULTS["operation_timeout"], max_retries=SESSION_DEFAULTS["max_retries"],
                 render_dir=None,
                 sleep=time.sleep, credential=None, log=None, clock=time.monotonic,
                 poll_interval=DEFAULT_POLL_INTERVAL, authority_host=None, secrets=None):
        if not subscription_id:
            raise CredentialsError("subscription_id is required", option="subscription_id")
        if cloud not in CLOUDS:
            raise CredentialsError("cloud must be one of %s, got %r" % (", ".join(sorted(CLOUDS)), cloud),
                                   option="cloud")
        self.secrets = secrets if secrets is not None else Secrets()
        self.secrets.add(client_secret)
        self.subscription_id = subscription_id
        self.cloud = cloud
        # the scheme is kept as given: a test double may be plain http on 127.0.0.1
        endpoint = arm_endpoint or CLOUDS[cloud].arm_endpoint
        self.arm_endpoint = endpoint if endpoint.endswith("/") else endpoint + "/"
        self.scope = CLOUDS[cloud].audience + ".default"
        self._keep_run_settings(operation_timeout, render_dir, sleep, clock, log)
        self.poll_interval = poll_interval
        self._bearer = None
        if self.render:
            session = self.render_session = RenderSession(render_dir, "arm", self._render_responder)
        else:
            tenant_id = clean_credential("tenant_id", tenant_id)
            client_id = clean_credential("client_id", client_id)
            client_secret = clean_credential("client_secret", client_secret)
            if credential is None:
                credential = build_credential(cloud, tenant_id, client_id, client_secret, authority_host)
            self._bearer = _BearerSession(credential, self.scope, self.secrets, authority_of(cloud, authority_host),
                                          _credential_kind(tenant_id, client_id, client_secret))
            session = self._bearer
        self.http = self._http_client(session, max_retries, sleep, request_timeout)

    @classmethod
    def module_arguments(cls, params):
        """ArmSession's keyword arguments from the AZURE_COMMON_SPEC options of a module."""
        names = ("subscription_id", "arm_endpoint", "tenant_id", "client_id", "client_secret", "authority_host")
        cloud = params.get("cloud") or "public"
        return dict([(name, params.get(name)) for name in names], cloud=AZURE_CLOUD_ENVIRONMENTS.get(cloud, cloud))

    @classmethod
    def libraries(cls, kwargs):
        # an injected credential (tests) needs no azure-identity
        return [] if "credential" in kwargs else [(HAS_AZURE_IDENTITY, "azure-identity", AZURE_IDENTITY_IMPORT_ERROR)]

    def login(self):
        """Get the first token now: a failure is a login failure at the authority host, not an ARM answer."""
        if self._bearer is not None:
            try:
                self._bearer.token()
            except LoginError as exc:
                raise CredentialsError(exc.message) from None

    # ---------------------------------------------------------------- URLs

    def url(self, path, api_version):
        """``<arm>/subscriptions/<id>/<path>?api-version=<v>``; a path that is an ARM ID (``/subscriptions/...``) is kept whole."""
        path = path.lstrip("/")
        if not path.startswith("subscriptions/"):
            path = "subscriptions/%s/%s" % (self.subscription_id, path)
        return "%s%s?api-version=%s" % (self.arm_endpoint, path, api_version)

    def absolute(self, link):
        """A URL from a response header, as is (ARM gives absolute URLs)."""
        if link.startswith("http://") or link.startswith("https://"):
            return link
        return self.arm_endpoint + link.lstrip("/")

    # ---------------------------------------------------------------- requests

    def get(self, url):
        """The resource at ``url``, or None when it does not exist (404)."""
        return self.http.get(url)

    def _write(self, method, url, body):
        response = self.http.request(method, url, body=body)
        return ArmResponse(response.body if response.body is not None else {}, response.headers or {},
                           method, url, response.status)

    def put(self, url, body=None):
        return self._write("PUT", url, body)

    def patch(self, url, body=None):
        return self._write("PATCH", url, body)

    def delete(self, url, body=None):
        return self._write("DELETE", url, body)

    def post(self, url, body=None):
        return self._write("POST", url, body)

    # ---------------------------------------------------------------- long-running operations

    def wait(self, response, timeout=None):
        """The final resource (PUT/PATCH), result (POST) or None (DELETE) of a write; LroError when it failed."""
        body, headers = response[0], response[1]
        method = getattr(response, "method", "PUT")
        url = getattr(response, "url", None)
        status = getattr(response, "status", 200)
        async_url = _header(headers, "Azure-AsyncOperation")
        location = _header(headers, "Location")
        delay = parse_retry_after(_header(headers, "Retry-After"))
        if async_url:
            self._poll_async_operation(self.absolute(async_url), method, url, timeout, delay)
            return self._final(method, url, location, body)
        if location and status in (201, 202):
            return self._poll_location(self.absolute(location), method, url, timeout, delay)
        if method == "DELETE":
            if status == 202 and url:
                return self.wait_for_state(url, method="DELETE", timeout=timeout, delay=delay)
            return None
        state = provisioning_state(body)
        if state is None or state.lower() == SUCCEEDED:
            return body or None
        if url is None:
            raise LroError(method, url, state, detail="no URL to poll the provisioning state at")
        return self.wait_for_state(url, method=method, first=body, timeout=timeout, delay=delay)

    def wait_for_state(self, url, method="GET", first=None, timeout=None, delay=None):
        """GET ``url`` until its provisioningState is terminal; the document.

        For ``method`` DELETE the wait ends only when the resource is gone (None). For GET (a
        resource found mid-operation) a resource that goes away gives None; for a write it is an
        LroError.
        """
        def settled(document):
            if document is None:
                if method in ("GET", "DELETE"):
                    return True
                raise LroError(method, url, "lost", detail="the resource disappeared before it was provisioned",
                               status=404)
            state = provisioning_state(document)
            if state is not None and state.lower() in FAILED_STATES:
                raise LroError(method, url, state, detail="provisioningState is %s" % state, operation=document)
            return method != "DELETE" and (state is None or state.lower() == SUCCEEDED)

        first = first if first is not None else self.get(url)
        return self._until(lambda: self.get(url), settled, method, url, timeout, delay, first=first)

    def _until(self, poll, done, method, url, timeout, delay, first=NOT_READ):
        """The waiter with ARM's pauses: the server's ``Retry-After`` (``delay``, then each poll's), else
        ``poll_interval``; a timeout is an LroError naming the request."""
        timeout = self.operation_timeout if timeout is None else timeout
        hints = [delay]

        def pause(value, attempt):
            del value, attempt
            hint, hints[0] = hints[0], None
            return self.poll_interval if hint is None else hint

        def polled():
            value = poll()
            if isinstance(value, Response):
                hints[0] = parse_retry_after(_header(value.headers, "Retry-After"))
            return value

        try:
            return self.waiter.until(polled, done, timeout, pause, first=first, pause_first=first is NOT_READ)
        except WaitTimeout as exc:
            state = provisioning_state(exc.last) if isinstance(exc.last, dict) else None
            raise LroError(method, url, "timed out", detail="still %s after %s seconds" % (
                state or "in progress", timeout)) from None

    def _poll_async_operation(self, op_url, method, url, timeout, delay):
        def done(response):
            operation = response.body or {}
            state = str(operation.get("status") or "InProgress")
            if state.lower() in FAILED_STATES:
                error = operation.get("error") or {}
                raise LroError(method, url, state, code=error.get("code"), detail=error.get("message"),
                               operation=operation)
            return state.lower() == SUCCEEDED

        return self._until(lambda: self.http.request("GET", op_url), done, method, url, timeout, delay).body or {}

    def _poll_location(self, location, method, url, timeout, delay):
        def poll():
            try:
                return self.http.request("GET", location)
            except ApiError as exc:
                if exc.status == 404 and method == "DELETE":
                    return None
                error = (exc.body or {}).get("error") if isinstance(exc.body, dict) else None
                error = error if isinstance(error, dict) else {}
                raise LroError(method, url, "Failed", code=error.get("code"), detail=error.get("message") or exc.message,
                               status=exc.status, operation=exc.body) from None

        response = self._until(poll, lambda answer: answer is None or answer.status != 202, method, url, timeout, delay)
        if response is None:
            return None
        if method in ("PUT", "PATCH") and url:
            return self.get(url) or response.body
        return response.body

    def _final(self, method, url, location, body):
        if method == "DELETE":
            return None
        if method in ("PUT", "PATCH") and url:
            return self.get(url) or body or None
        if method == "POST" and location:
            return self.http.request("GET", self.absolute(location)).body
        return body or None

    # ---------------------------------------------------------------- render mode

    def _render_responder(self, method, url, body):
        """What ARM answers once a write has finished: the resource, Succeeded."""
        if method == "DELETE":
            return None
        document = copy.deepcopy(body) if isinstance(body, dict) else {}
        if method in ("PUT", "PATCH"):
            path = url.split("?")[0]
            if path.startswith(self.arm_endpoint):
                path = "/" + path[len(self.arm_endpoint):]
            document.setdefault("id", path)
            document.setdefault("name", path.rstrip("/").rsplit("/", 1)[-1])
            properties = document.setdefault("properties", {})
            if isinstance(properties, dict):
                properties["provisioningState"] = "Succeeded"
        return document
