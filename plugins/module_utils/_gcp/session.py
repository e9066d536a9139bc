# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The Google Cloud session every GCP module of this collection uses.

``GcpSession`` holds the credentials (google-auth), the endpoints of the GKE and Compute Engine APIs,
an ``_core.transport.HttpClient`` (the one retry loop) and the operation waiters:

- GKE operations (``projects/*/locations/*/operations/*``) are polled with a growing interval.
- Compute Engine operations (global or regional) are waited on with the API's ``wait`` method,
  which returns when the operation is DONE or after about two minutes, whichever comes first.

In render mode (``render_dir``) no credentials are read: the HTTP session is an
``_core.transport.RenderSession`` that records every write under ``<render_dir>/requests/`` and answers it
with an operation that is already DONE, so the engines run their normal code path.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import SESSION_DEFAULTS
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import (
    ApiError,
    CloudSession,
    CredentialsError,
    RenderSession,
    Secrets,
    clean_credential,
    installed,
    scrub,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import NOT_READ, Backoff, WaitTimeout

# google-auth (and requests under it) is imported when a session is built (transport.installed says why)
HAS_GOOGLE_AUTH, GOOGLE_AUTH_IMPORT_ERROR = installed("google.auth")


def requests_adapters():
    """requests.adapters, imported on first use (google-auth requires requests)."""
    from requests import adapters  # pylint: disable=import-outside-toplevel

    return adapters


def _google():
    """The ``google`` package with the parts of google-auth the session uses, imported on first use."""
    # pylint: disable=import-outside-toplevel
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests
    import google.oauth2.credentials
    import google.oauth2.service_account

    return google


DEFAULT_CONTAINER_ENDPOINT = "https://container.googleapis.com/"
DEFAULT_COMPUTE_ENDPOINT = "https://compute.googleapis.com/"
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
AUTH_KINDS = ("application", "serviceaccount", "accesstoken")

# compute ``wait`` answers after at most ~2 minutes; give the HTTP request room for that
COMPUTE_WAIT_REQUEST_TIMEOUT = 150


class OperationError(ApiError):
    """A long-running operation that finished with an error."""

    def __init__(self, operation, message, status=None, errors=None):
        self.operation = operation or {}
        self.errors = list(errors or [])
        self.operation_name = self.operation.get("name") or "(unnamed)"
        self.operation_type = self.operation.get("operationType") or ""
        target = self.operation.get("targetLink") or ""
        what = " ".join(p for p in (self.operation_type, target) if p)
        text = "operation %s%s failed: %s" % (self.operation_name, " (%s)" % what if what else "", message)
        super().__init__(status, text)

    def describe(self):
        return "%s%s" % ("HTTP %s: " % self.status if self.status else "", self.message)


class OperationTimeoutError(ApiError):
    """An operation that was not DONE within the time allowed."""

    def __init__(self, operation, seconds):
        self.operation = operation or {}
        self.operation_name = self.operation.get("name") or "(unnamed)"
        super().__init__(None, "operation %s (%s) was not DONE after %ss (status %s)" % (
            self.operation_name, self.operation.get("operationType") or "unknown type", seconds,
            self.operation.get("status") or "unknown"))

    def describe(self):
        return self.message


class _GoogleAuthSession:
    """Wraps AuthorizedSession: a refresh failure becomes an ApiError without secrets, and each token
    google-auth obtains joins the secrets the session scrubs."""

    def __init__(self, authorized, secrets):
        self.authorized = authorized
        self._secrets = secrets
        self._token = None

    def request(self, method, url, **kwargs):
        google = _google()
        try:
            return self.authorized.request(method, url, **kwargs)
        except google.auth.exceptions.GoogleAuthError as exc:
            raise ApiError(401, "could not obtain or refresh Google credentials: %s" % scrub(
                "%s: %s" % (type(exc).__name__, exc), self._secrets), method, url) from None
        finally:
            self.remember_token()

    def remember_token(self):
        token = getattr(self.authorized.credentials, "token", None)
        if token and token != self._token:
            self._token = token
            self._secrets.add(token)


def _pooled(session):
    """``session`` with room for run_concurrently's workers on one host."""
    adapter = requests_adapters().HTTPAdapter(pool_connections=4, pool_maxsize=32)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def _endpoint(url):
    return url if url.endswith("/") else url + "/"


# the fields of a service-account key google-auth reads, and the ones sent in a header, a URL or a JWT
_KEY_FIELDS = ("client_email", "private_key", "token_uri")
_KEY_IDENTIFIERS = ("client_email", "token_uri", "private_key_id", "client_id", "project_id")
# a PEM key is lines of base64 between BEGIN/END lines: line breaks belong to it, other controls do not
_PEM_CONTROL = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# what a 401 from the GKE or Compute Engine API means, per auth_kind
UNAUTHORIZED_HINTS = {
    "accesstoken": "the access token given in access_token was refused: it has expired or is not valid "
                   "(an access token cannot be refreshed: pass a new one, for example from "
                   "`gcloud auth print-access-token`)",
    "serviceaccount": "the service-account key's token was refused: check that the key and the account are "
                      "enabled and that the account has a role on the project",
    "application": "the Application Default Credentials' token was refused: check `gcloud auth "
                   "application-default login` or the account of the metadata server",
}


def service_account_info(text, option, secrets):
    """The parsed service-account key in ``text`` (from ``option``); CredentialsError naming the option
    and the field, never a value. The key and its private key join ``secrets``."""
    secrets.add(text if isinstance(text, str) else None)
    info = text
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            raise CredentialsError("auth_kind=serviceaccount: %s is not valid JSON (a service-account key)" % option,
                                   option=option) from None
    if not isinstance(info, dict):
        raise CredentialsError("auth_kind=serviceaccount: %s must be a JSON object (a service-account key)" % option,
                               option=option)
    for field in ("private_key", "private_key_id"):
        secrets.add(info.get(field) if isinstance(info.get(field), str) else None)
    if info.get("type", "service_account") != "service_account":
        raise CredentialsError("auth_kind=serviceaccount: %s has type %r; a service-account key has type "
                               "service_account" % (option, info.get("type")), option=option)
    missing = [f for f in _KEY_FIELDS if not isinstance(info.get(f), str) or not info[f].strip()]
    if missing:
        raise CredentialsError("auth_kind=serviceaccount: %s lacks %s (a service-account key has %s)" % (
            option, ", ".join(missing), ", ".join(_KEY_FIELDS)), option=option)
    info = dict(info)
    for field in _KEY_IDENTIFIERS:
        if isinstance(info.get(field), str):
            info[field] = clean_credential(option, info[field], what="its field %s" % field)
    if _PEM_CONTROL.search(info["private_key"]):
        raise CredentialsError("%s: its field private_key contains a control character other than a line break; "
                               "refused before anything was sent (the value is not shown)" % option, option=option)
    return info


def read_service_account_file(path, secrets):
    """The text of the key file at ``path`` (service_account_file)."""
    clean_credential("service_account_file", path, what="the path")
    if path != path.strip():
        raise CredentialsError("service_account_file: the path begins or ends with white space (a line break "
                               "read with it?); refused rather than guessed", option="service_account_file")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeError) as exc:
        raise CredentialsError("service_account_file: cannot read %s: %s" % (
            path, exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"),
            option="service_account_file") from None
    secrets.add(text)
    return text


def static_token(access_token):
    """The access token of auth_kind=accesstoken as it is sent; CredentialsError when none is given."""
    if not access_token:
        raise CredentialsError("auth_kind=accesstoken needs access_token", option="access_token")
    return clean_credential("access_token", access_token, token=True)


def google_credentials(auth_kind, service_account_file, service_account_contents, access_token, scopes, secrets):
    """google-auth credentials for ``auth_kind`` and the token endpoint of a key (None otherwise).

    The one place the options become credentials: GcpSession and the kubeconfig's exec credential plugin
    (``_gcp/exec_credential.py``) both call it. Secrets read on the way join ``secrets``.
    """
    if not HAS_GOOGLE_AUTH:
        raise CredentialsError("google-auth is required to talk to Google Cloud (pip install google-auth)")
    if auth_kind not in AUTH_KINDS:
        raise CredentialsError("auth_kind must be one of %s, got %r" % (", ".join(AUTH_KINDS), auth_kind),
                               option="auth_kind")
    google = _google()
    try:
        if auth_kind == "accesstoken":
            return google.oauth2.credentials.Credentials(static_token(access_token)), None
        if auth_kind == "serviceaccount":
            if service_account_contents:
                info = service_account_info(service_account_contents, "service_account_contents", secrets)
            elif service_account_file:
                info = service_account_info(read_service_account_file(service_account_file, secrets),
                                            "service_account_file", secrets)
            else:
                raise CredentialsError(
                    "auth_kind=serviceaccount needs service_account_file or service_account_contents")
            return (google.oauth2.service_account.Credentials.from_service_account_info(info, scopes=scopes),
                    info["token_uri"])
        credentials, dummy = google.auth.default(scopes=scopes)
        return credentials, None
    except CredentialsError:
        raise
    except (google.auth.exceptions.GoogleAuthError, ValueError, KeyError, OSError) as exc:
        raise CredentialsError("could not load %s credentials: %s" % (
            auth_kind, scrub("%s: %s" % (type(exc).__name__, exc), secrets))) from None


def refresh(credentials, auth_kind, token_uri, secrets):
    """Obtain a token now (an access token is used as given); CredentialsError naming where the login failed.
    The token joins ``secrets``."""
    if auth_kind == "accesstoken":
        return
    google = _google()
    try:
        credentials.refresh(google.auth.transport.requests.Request())
    except (google.auth.exceptions.GoogleAuthError, ValueError) as exc:
        where = token_uri or "the source of Application Default Credentials (gcloud, metadata server)"
        raise CredentialsError("Google login failed at %s (auth_kind=%s): %s" % (
            where, auth_kind, scrub("%s: %s" % (type(exc).__name__, exc), secrets))) from None
    finally:
        secrets.add(getattr(credentials, "token", None))


class GcpSession(CloudSession):
    """Credentials, endpoints, HTTP with retries, operation waiters and a small thread pool."""

    LIBRARIES = ((HAS_GOOGLE_AUTH, "google-auth", GOOGLE_AUTH_IMPORT_ERROR),)

    def __init__(self, project, auth_kind="application", service_account_file=None,
                 service_account_contents=None, access_token=None, scopes=None,
                 container_endpoint=DEFAULT_CONTAINER_ENDPOINT, compute_endpoint=DEFAULT_COMPUTE_ENDPOINT,
                 request_timeout=SESSION_DEFAULTS["request_timeout"],
                 operation_timeout=SESSION_DEFAULTS["operation_timeout"], max_retries=SESSION_DEFAULTS["max_retries"],
                 render_dir=None,
                 sleep=time.sleep, log=None, clock=time.monotonic, poll_initial=1.0, poll_max=10.0, secrets=None):
        if not project:
            raise CredentialsError("project is required", option="project")
        self.project = project
        self.container_endpoint = _endpoint(container_endpoint or DEFAULT_CONTAINER_ENDPOINT)
        self.compute_endpoint = _endpoint(compute_endpoint or DEFAULT_COMPUTE_ENDPOINT)
        self.request_timeout = request_timeout
        self._keep_run_settings(operation_timeout, render_dir, sleep, clock, log)
        self.poll_initial = poll_initial
        self.poll_max = poll_max
        self.auth_kind = auth_kind
        self.token_uri = None
        self.secrets = secrets if secrets is not None else Secrets()
        self.secrets.add(access_token)
        self.secrets.add(service_account_contents if isinstance(service_account_contents, str) else None)
        self._render_counter = itertools.count(1)
        self._render_lock = threading.Lock()
        self._once = {}  # url -> [lock, answer, answered]: reads that stay true for the run (read_once)
        self._once_lock = threading.Lock()
        self._auth = None
        if self.render:
            session = self.render_session = RenderSession(render_dir, "gcp", self._render_responder)
        elif auth_kind == "accesstoken":
            session = self._token_session(access_token)
        else:
            self._auth = _GoogleAuthSession(
                self._authorized_session(auth_kind, service_account_file, service_account_contents,
                                         access_token, list(scopes or DEFAULT_SCOPES)),
                self.secrets)
            session = self._auth
        hint = UNAUTHORIZED_HINTS.get(auth_kind)
        self.http = self._http_client(session, max_retries, sleep, request_timeout, hint)
        self._wait_http = self._http_client(session, max_retries, sleep,
                                            max(request_timeout, COMPUTE_WAIT_REQUEST_TIMEOUT), hint)

    # ---------------------------------------------------------------- construction

    @classmethod
    def module_arguments(cls, params):
        """GcpSession's keyword arguments from the GCP_COMMON_SPEC options of a module."""
        return dict(
            project=params["project"],
            auth_kind=params.get("auth_kind") or "application",
            service_account_file=params.get("service_account_file"),
            service_account_contents=params.get("service_account_contents"),
            access_token=params.get("access_token"),
            scopes=params.get("scopes"),
            container_endpoint=params.get("container_endpoint") or DEFAULT_CONTAINER_ENDPOINT,
            compute_endpoint=params.get("compute_endpoint") or DEFAULT_COMPUTE_ENDPOINT,
        )

    def login(self):
        """Obtain a token now for a key or Application Default Credentials (an access token is used as
        given): a failure is a login failure at the token endpoint, reported before any API request."""
        credentials = self._auth.authorized.credentials if self._auth else None
        if credentials is None:
            return
        try:
            refresh(credentials, self.auth_kind, self.token_uri, self.secrets)
        finally:
            self._auth.remember_token()

    def _authorized_session(self, auth_kind, service_account_file, service_account_contents, access_token, scopes):
        credentials = self._credentials(auth_kind, service_account_file, service_account_contents, access_token, scopes)
        google = _google()
        return _pooled(google.auth.transport.requests.AuthorizedSession(
            credentials, refresh_status_codes=google.auth.transport.DEFAULT_REFRESH_STATUS_CODES))

    @staticmethod
    def _token_session(access_token):
        """A session that sends a static access token as it is. Nothing refreshes it (a 401 reaches us as it is), so
        google-auth has nothing to add, and its import (with the key-signing code it pulls in) was about a quarter
        of a module run's CPU."""
        token = static_token(access_token)
        from requests import Session  # pylint: disable=import-outside-toplevel

        session = Session()
        session.headers["Authorization"] = "Bearer " + token
        return _pooled(session)

    def _credentials(self, auth_kind, service_account_file, service_account_contents, access_token, scopes):
        credentials, self.token_uri = google_credentials(auth_kind, service_account_file, service_account_contents,
                                                         access_token, scopes, self.secrets)
        return credentials

    # ---------------------------------------------------------------- URLs

    def container_url(self, path, beta=False):
        """``<container endpoint>v1/<path>`` (``v1beta1`` with ``beta``)."""
        return "%s%s/%s" % (self.container_endpoint, "v1beta1" if beta else "v1", path.lstrip("/"))

    def compute_url(self, path):
        """``<compute endpoint>compute/v1/projects/<project>/<path>``."""
        return "%scompute/v1/projects/%s/%s" % (self.compute_endpoint, self.project, path.lstrip("/"))

    def compute_link(self, link):
        """A compute resource URL (selfLink from any host, or a relative ``projects/...`` path) on our endpoint."""
        if "/compute/v1/" in link:
            return self.compute_endpoint + "compute/v1/" + link.split("/compute/v1/", 1)[1]
        link = link.lstrip("/")
        if link.startswith("projects/"):
            return self.compute_endpoint + "compute/v1/" + link
        return self.compute_url(link)

    # ---------------------------------------------------------------- requests

    def get(self, url, params=None):
        """The resource at ``url``, or None when it does not exist (404)."""
        return self.http.get(url, params=params)

    def read_once(self, url):
        """``get(url)``, sent at most once per session (one module run); concurrent callers share the answer.

        For facts that do not change during a run (regions, zones, machine types, GKE server config).
        An error is not kept: the next caller reads again.
        """
        with self._once_lock:
            entry = self._once.setdefault(url, [threading.Lock(), None, False])
        with entry[0]:
            if not entry[2]:
                entry[1], entry[2] = self.get(url), True
            return entry[1]

    def post(self, url, body=None, params=None):
        return self.http.request("POST", url, body=body, params=params).body or {}

    def patch(self, url, body=None, params=None):
        return self.http.request("PATCH", url, body=body, params=params).body or {}

    def put(self, url, body=None, params=None):
        return self.http.request("PUT", url, body=body, params=params).body or {}

    def delete(self, url, body=None, params=None):
        return self.http.request("DELETE", url, body=body, params=params).body or {}

    def delete_if_present(self, url):
        """``delete(url)``'s operation, or None when the resource is already gone (404): a re-run after an
        interrupted delete converges instead of failing."""
        try:
            return self.delete(url)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None

    # ---------------------------------------------------------------- operations

    def wait_container_operation(self, op, timeout=None):
        """Poll a GKE operation until DONE; OperationError when it ended with an error."""
        timeout = self.operation_timeout if timeout is None else timeout
        url = self._container_operation_url(op)

        def poll():
            latest = self.get(url)
            if latest is None:
                raise OperationError(op, "the operation disappeared (404 on %s)" % url, status=404)
            return latest

        try:
            op = self.waiter.until(poll, _done, timeout, Backoff(self.poll_initial, self.poll_max), first=op or {})
        except WaitTimeout as exc:
            raise OperationTimeoutError(exc.last, timeout) from None
        error = op.get("error")
        if error:
            raise OperationError(op, error.get("message") or error.get("code") or "unknown error",
                                 status=_google_rpc_http_status(error.get("code")), errors=[error])
        return op

    def settle(self, poll, done, what, first=NOT_READ):
        """``poll()`` until ``done(value)`` within ``operation_timeout``, with growing pauses (``_waiter``)."""
        return self.waiter.until(poll, done, self.operation_timeout, Backoff(self.poll_initial, self.poll_max),
                                 what=what, first=first)

    def _container_operation_url(self, op):
        name = (op or {}).get("name") or ""
        if name.startswith("projects/"):
            return self.container_url(name)
        location = op.get("location") or op.get("zone")
        if location and "/" not in location:
            return self.container_url("projects/%s/locations/%s/operations/%s" % (self.project, location, name))
        link = op.get("selfLink") or ""
        match = re.search(r"(projects/[^/]+/(?:locations|zones)/[^/]+/operations/[^/?]+)", link)
        if match:
            return self.container_url(match.group(1).replace("/zones/", "/locations/"))
        if self.render:
            return ""
        raise OperationError(op, "cannot tell where to poll it (no location, zone or selfLink)")

    def wait_compute_operation(self, op, timeout=None):
        """Wait on a global or regional compute operation with its ``wait`` method until DONE.

        ``wait`` itself blocks on the server (up to about two minutes), so there is no pause between calls.
        """
        timeout = self.operation_timeout if timeout is None else timeout
        op = op or {}
        urls = []

        def poll():
            if not urls:
                urls.append(self._compute_operation_url(op) + "/wait")
            return self._wait_http.request("POST", urls[0]).body or {}

        try:
            op = self.waiter.until(poll, _done, timeout, lambda value, attempt: 0.0, first=op)
        except WaitTimeout as exc:
            raise OperationTimeoutError(exc.last, timeout) from None
        errors = ((op.get("error") or {}).get("errors")) or []
        if errors:
            message = "; ".join("%s: %s" % (e.get("code") or "ERROR", e.get("message") or "") for e in errors)
            raise OperationError(op, message, status=op.get("httpErrorStatusCode"), errors=errors)
        return op

    def _compute_operation_url(self, op):
        if op.get("selfLink"):
            return self.compute_link(op["selfLink"])
        name = op.get("name")
        if not name:
            raise OperationError(op, "cannot tell where to wait for it (no selfLink or name)")
        if op.get("zone"):
            return self.compute_url("zones/%s/operations/%s" % (op["zone"].rstrip("/").split("/")[-1], name))
        if op.get("region"):
            return self.compute_url("regions/%s/operations/%s" % (op["region"].rstrip("/").split("/")[-1], name))
        return self.compute_url("global/operations/%s" % name)

    # ---------------------------------------------------------------- concurrency

    def run_concurrently(self, tasks, max_workers=8):
        """Run zero-argument callables concurrently; their results in task order.

        Render mode runs them one after the other so that the request files come out in a stable
        order. When tasks fail, the others still run to the end; then the first error (in task
        order) is raised with ``others`` holding the rest.
        """
        tasks = list(tasks)
        outcomes = []
        if self.render or len(tasks) <= 1 or max_workers <= 1:
            for task in tasks:
                outcomes.append(_outcome(task))
        else:
            with ThreadPoolExecutor(max_workers=min(max_workers, len(tasks))) as pool:
                futures = [pool.submit(_outcome, task) for task in tasks]
                outcomes = [future.result() for future in futures]
        errors = [error for ok, error in outcomes if not ok]
        if errors:
            first = errors[0]
            try:
                first.others = list(getattr(first, "others", None) or []) + errors[1:]
            except AttributeError:  # pragma: no cover - exceptions with __slots__
                pass
            raise first
        return [value for dummy, value in outcomes]

    # ---------------------------------------------------------------- render mode

    def _render_responder(self, method, url, body):
        with self._render_lock:
            number = next(self._render_counter)
        target = url.split("?")[0]
        if target.startswith(self.compute_endpoint + "compute/"):
            verb = {"POST": "insert", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())
            if method == "POST" and isinstance(body, dict) and body.get("name"):
                target = "%s/%s" % (target, body["name"])
            elif method == "POST" and not target.rsplit("/", 1)[-1].islower():
                verb = target.rsplit("/", 1)[-1]
            return dict(kind="compute#operation", name="operation-render-%03d" % number, status="DONE",
                        operationType=verb, targetLink=target, progress=100)
        parts = target.split("/")
        kind = "NODE_POOL" if "nodePools" in parts else "CLUSTER"
        verb = {"POST": "CREATE", "PUT": "UPDATE", "PATCH": "UPDATE", "DELETE": "DELETE"}.get(method, "UPDATE")
        if ":" in parts[-1]:
            verb = "UPDATE"
        location = ""
        if "locations" in parts and parts.index("locations") + 1 < len(parts):
            location = parts[parts.index("locations") + 1]
        return dict(name="operation-render-%03d" % number, status="DONE", operationType="%s_%s" % (verb, kind),
                    targetLink=target, location=location)


def _done(operation):
    return operation.get("status") == "DONE"


def _outcome(task):
    try:
        return True, task()
    except Exception as exc:  # pylint: disable=broad-except
        return False, exc


# google.rpc.Code -> HTTP status (the ones GKE operations report)
_RPC_HTTP = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
             12: 501, 13: 500, 14: 503, 15: 500, 16: 401}


def _google_rpc_http_status(code):
    try:
        return _RPC_HTTP.get(int(code))
    except (TypeError, ValueError):
        return None
