# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one HTTP layer under the GCP and ARM sessions.

- ``HttpClient`` sends JSON requests through a requests-compatible session (google-auth's
  AuthorizedSession, or a requests.Session carrying an Azure bearer token) and retries 429, 5xx and
  connection resets with full-jitter exponential backoff, honouring ``Retry-After``.
- ``RenderSession`` stands in for that session in render mode: it sends nothing, answers every
  read with 404 (the world is empty), answers every write with what the API session says a
  finished write looks like, and records each write, in order, under ``<render_dir>/requests/``.

Nothing here logs headers, so credentials never reach a log or a result.
"""

from __future__ import annotations

import base64
import fcntl
import importlib.util
import json
import os
import random
import re
import threading
import time
from urllib import parse as urllib_parse

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import SESSION_DEFAULTS
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import Waiter, WaitTimeout


def installed(name):
    """(present, the ImportError to report when it is not) for the library ``name``, known without importing it.

    The cloud clients (requests, google-auth, azure-identity) are imported when a session is built or the first
    request is sent, not with the engines: the preflight imports the engines in the controller to check a request's
    values, which sends nothing, and a GKE run of gpu_nodepool never builds an Azure credential."""
    try:
        present = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken installation, or no namespace package at all
        present = False
    return present, None if present else ImportError("No module named %r" % name)


HAS_REQUESTS = installed("requests")[0]


def request_errors():
    """(transient, any) exception classes of one HTTP request: transient ones are retried."""
    try:
        from requests import exceptions  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - reported by the module through missing_required_lib
        return (ConnectionError,), (ValueError,)
    return ((exceptions.ConnectionError, exceptions.ChunkedEncodingError, exceptions.Timeout),
            (exceptions.RequestException, ValueError))


RETRY_STATUSES = frozenset((429, 500, 502, 503, 504))
MUTATING_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))


def check_session_options(module, libraries=()):
    """Refuse cleanly, before any request (``EngineError``): a missing library (not needed in render mode,
    which sends nothing) or a timeout / retry option out of range. ``libraries`` holds
    (present, pip name, import error) triples."""
    params = module.params
    if not params.get("render_dir"):
        for present, name, import_error in ((HAS_REQUESTS, "requests", None),) + tuple(libraries):
            if not present:
                raise EngineError(missing_required_lib(name), exception=str(import_error) if import_error else None)
    for option in ("request_timeout", "operation_timeout"):
        if params.get(option) is not None and params[option] <= 0:
            raise EngineError("%s must be greater than 0, got %s" % (option, params[option]))
    if params.get("max_retries") is not None and params["max_retries"] < 0:
        raise EngineError("max_retries must be 0 or more, got %s" % params["max_retries"])


def session_options(module):
    """The keyword arguments every API session takes from the shared module options
    (timeouts, retries, render mode, debug log); an option left unset gets its default from
    ``_core.argspec.SESSION_SPEC``, the one place the defaults are written."""
    params = module.params
    options = dict((name, default if params.get(name) is None else params[name])
                   for name, default in SESSION_DEFAULTS.items())
    options["log"] = module.debug
    return options


class CredentialsError(Exception):
    """Credentials could not be obtained or used (GCP or Azure); the message never carries a secret.

    ``option`` names the module option at fault, when there is one."""

    def __init__(self, message, option=None):
        super().__init__(message)
        self.option = option


# ---------------------------------------------------------------------------------------------
# Credential values: checked before use, and scrubbed from everything we say
# ---------------------------------------------------------------------------------------------

# C0 and C1 control characters and DEL: never part of a token, a secret or a key's identifiers
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# the token68 alphabet of RFC 6750 (what a bearer token is written in)
_TOKEN68 = re.compile(r"^[A-Za-z0-9._~+/-]+=*\Z")
# a secret shorter than this is not masked inside other text (it would mask unrelated words)
MIN_SECRET_LENGTH = 4


def clean_credential(option, value, token=False, what="the value"):
    """``value`` of the credential ``option`` with surrounding white space (a newline read from a file)
    stripped; a CredentialsError naming the option, never the value, when a control character (CR,
    LF, tab, NUL, ...) or, for a bearer ``token``, any character outside RFC 6750's token68 is left."""
    if value is None or value == "":
        return None
    text = "%s" % (value,)
    stripped = text.strip()
    if not stripped:
        raise CredentialsError("%s is empty (or only white space)" % option, option=option)
    if _CONTROL.search(stripped):
        raise CredentialsError("%s: %s contains a line break or another control character inside it; refused "
                               "before anything was sent (the value is not shown)" % (option, what), option=option)
    if token and not _TOKEN68.match(stripped):
        raise CredentialsError("%s: %s contains characters a bearer token cannot hold (white space, quotes, "
                               "non-ASCII); refused before anything was sent (the value is not shown)"
                               % (option, what), option=option)
    return stripped


def secret_forms(secret):
    """Every way ``secret`` may be written in a message: raw, stripped, repr/JSON-escaped, base64 (standard
    and URL-safe, padded or not) and URL-encoded (quote, quote_plus); none shorter than MIN_SECRET_LENGTH."""
    if secret is None:
        return set()
    raw = secret if isinstance(secret, str) else "%s" % (secret,)
    forms = set()
    for text in sorted(set((raw, raw.strip()))):
        forms.update((text, repr(text)[1:-1], json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1],
                      text.encode("unicode_escape").decode("ascii"),
                      urllib_parse.quote(text, safe=""), urllib_parse.quote(text), urllib_parse.quote_plus(text)))
        data = text.encode("utf-8")
        for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            encoded = encoded.decode("ascii")
            forms.update((encoded, encoded.rstrip("=")))
    return set(form for form in forms if len(form) >= MIN_SECRET_LENGTH)


class Secrets:
    """The secrets of one session in every form (``secret_forms``), longest first; ``sink`` (a module's
    ``no_log_values``) gets each form too, so that Ansible masks them in whatever the module returns."""

    def __init__(self, values=(), sink=None):
        self._forms = []
        self._sink = sink
        self._lock = threading.Lock()
        for value in values:
            self.add(value)

    def add(self, value):
        """Remember ``value`` (a token obtained at run time, a key, a secret option)."""
        forms = secret_forms(value)
        if not forms:
            return
        with self._lock:
            self._forms = sorted(set(self._forms) | forms, key=len, reverse=True)
        if self._sink is not None:
            self._sink.update(forms)

    def __iter__(self):
        return iter(list(self._forms))


# what a token or key looks like in an error text: a bearer header, a Google access token, a JWT
# (Microsoft Entra tokens), a PEM private key (service-account keys)
_SECRET_SHAPES = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1********"),
    (re.compile(r"ya29\.[A-Za-z0-9._-]+"), "********"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), "********"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "********"),
)


def scrub(text, secrets=()):
    """``text`` with every form of every secret (see ``secret_forms``; ``secrets`` may be a ``Secrets``),
    and anything shaped like a bearer token, a JWT or a private key, masked. The one scrubber."""
    text = "%s" % (text,)
    forms = secrets if isinstance(secrets, Secrets) else sorted(
        set().union(*[secret_forms(s) for s in secrets if s]) if secrets else (), key=len, reverse=True)
    for form in forms:
        text = text.replace(form, "********")
    for shape, mask in _SECRET_SHAPES:
        text = shape.sub(mask, text)
    return text


def scrub_value(value, secrets=()):
    """``scrub`` applied to every string inside a JSON-like value (dicts, lists), keys included."""
    if isinstance(value, dict):
        return dict((scrub_value(k, secrets), scrub_value(v, secrets)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [scrub_value(item, secrets) for item in value]
    if isinstance(value, str):
        return scrub(value, secrets)
    return value


class ApiError(Exception):
    """An HTTP error the API returned (after retries), or a request that never got an answer."""

    def __init__(self, status, message, method=None, url=None, body=None):
        self.status = status
        self.message = message
        self.method = method
        self.url = url
        self.body = body
        super().__init__(self.describe())

    def describe(self):
        where = " ".join(p for p in (self.method, self.url) if p)
        return "%s%s: %s" % ("HTTP %s " % self.status if self.status else "", where, self.message)


class RetryPolicy:
    """Full-jitter exponential backoff; ``Retry-After`` (seconds) is a floor."""

    def __init__(self, max_retries=SESSION_DEFAULTS["max_retries"], base_delay=1.0, max_delay=32.0, sleep=time.sleep, rng=random.random):
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.rng = rng

    def delay(self, attempt, retry_after=None):
        backoff = self.rng() * min(self.max_delay, self.base_delay * (2 ** attempt))
        if retry_after is not None:
            return max(backoff, min(retry_after, self.max_delay * 4))
        return backoff


def parse_retry_after(value):
    """Seconds from a Retry-After header (delta-seconds form); None when absent or a date."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def error_message(body, text):
    """The human message of a Google or ARM error document, else the raw text."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("message") or error.get("code") or json.dumps(error)
        if isinstance(error, str):
            return body.get("error_description") or error
        if body.get("message"):
            return body["message"]
    return (text or "").strip()[:500] or "no error message"


class Response:
    """What callers get back: status, headers and the decoded JSON body (or None)."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body


class HttpClient:
    """JSON over a requests-compatible session, with retries."""

    def __init__(self, session, retry=None, timeout=SESSION_DEFAULTS["request_timeout"], on_retry=None,
                 secrets=None, unauthorized_hint=None):
        self.session = session
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.on_retry = on_retry
        self.secrets = secrets if secrets is not None else Secrets()
        # what a 401 means for the credential in use (an expired access token, a key without access)
        self.unauthorized_hint = unauthorized_hint

    def error(self, status, message, method, url, body=None):
        """An ApiError whose message and body are scrubbed of every secret of the session."""
        message = scrub(message, self.secrets)
        if status == 401 and self.unauthorized_hint:
            message = "%s; %s" % (message, self.unauthorized_hint)
        return ApiError(status, message, method, url, scrub_value(body, self.secrets))

    def request(self, method, url, body=None, params=None, headers=None):
        """Send one request; returns a Response for 2xx, raises ApiError otherwise."""
        transient, failures = request_errors()

        def attempt():
            try:
                raw = self.session.request(
                    method, url, json=body, params=params, headers=headers, timeout=self.timeout
                )
            except transient as exc:
                return _Retry(type(exc).__name__, None, None)
            except failures as exc:
                # e.g. requests' InvalidHeader, which quotes the header value (the token) it refused
                raise self.error(None, "%s: %s" % (type(exc).__name__, exc), method, url) from None
            decoded = _decode(raw)
            if 200 <= raw.status_code < 300:
                return Response(raw.status_code, raw.headers, decoded)
            error = self.error(raw.status_code, error_message(decoded, raw.text), method, url, decoded)
            if raw.status_code in RETRY_STATUSES:
                return _Retry(raw.status_code, parse_retry_after(raw.headers.get("Retry-After")), error)
            raise error

        def pause(retry, attempt):
            delay = self.retry.delay(attempt, retry.retry_after)
            if self.on_retry:
                self.on_retry("retrying %s %s after %s (attempt %d, %.1fs)" % (method, url, retry.why, attempt + 1, delay))
            return delay

        waiter = Waiter(sleep=self.retry.sleep)
        try:
            return waiter.until(attempt, lambda answer: isinstance(answer, Response), float("inf"), pause,
                                attempts=self.retry.max_retries)
        except WaitTimeout as exc:
            if exc.last.error is not None:
                raise exc.last.error from None
            raise ApiError(None, "no answer after %d attempts: %s" % (self.retry.max_retries + 1, exc.last.why),
                           method, url) from None

    def get(self, url, params=None):
        """The resource at ``url``, or None when it does not exist."""
        try:
            return self.request("GET", url, params=params).body
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise


class _Retry:
    """An attempt worth repeating: why (an exception name or a status), the server's Retry-After, the error."""

    def __init__(self, why, retry_after, error):
        self.why = why
        self.retry_after = retry_after
        self.error = error


def _decode(raw):
    if not raw.content:
        return None
    try:
        return raw.json()
    except ValueError:
        return None


class RenderLog:
    """Numbered request files under ``<render_dir>/requests/``, continuing across module runs.

    Several module runs may record at once (one per inventory host, in parallel worker processes, as when a
    playbook renders every cluster of a fleet): the folder itself is locked (``flock``, no lock file in the
    plan) while a number is chosen and its file written, so every request gets its own number and none is
    overwritten."""

    _lock = threading.Lock()

    def __init__(self, render_dir):
        self.folder = os.path.join(render_dir, "requests")

    def record(self, api, method, url, body):
        with self._lock:
            os.makedirs(self.folder, exist_ok=True)
            folder = os.open(self.folder, os.O_RDONLY)
            try:
                fcntl.flock(folder, fcntl.LOCK_EX)
                index = 1 + max([int(n.split("-", 1)[0]) for n in os.listdir(self.folder) if n[:3].isdigit()] or [0])
                name = "%03d-%s-%s-%s.json" % (index, api, method.lower(), _slug(url))
                path = os.path.join(self.folder, name)
                with open(path, "w") as handle:
                    json.dump(dict(api=api, method=method, url=url, body=body), handle, indent=2, sort_keys=True)
                    handle.write("\n")
            finally:
                os.close(folder)  # releases the lock
            return path


def _slug(url):
    tail = re.sub(r"^https?://[^/]+/", "", url.split("?")[0])
    parts = [p for p in tail.split("/") if p]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(parts[-2:]))[:80] or "root"


class _RenderedRaw:
    """Enough of a requests.Response for HttpClient."""

    def __init__(self, status, body):
        self.status_code = status
        self.headers = {}
        self.content = b"" if body is None else json.dumps(body).encode()
        self.text = self.content.decode()
        self._body = body

    def json(self):
        return self._body


class RenderSession:
    """A session that sends nothing: reads find nothing, writes are recorded and succeed."""

    def __init__(self, render_dir, api, responder):
        self.log = RenderLog(render_dir)
        self.api = api
        self.responder = responder
        self.written = []

    def request(self, method, url, json=None, params=None, headers=None, timeout=None):  # pylint: disable=redefined-outer-name
        del headers, timeout
        if method not in MUTATING_METHODS:
            return _RenderedRaw(404, {"error": {"code": 404, "message": "render mode: nothing exists yet"}})
        full_url = url if not params else "%s?%s" % (url, "&".join("%s=%s" % kv for kv in sorted(params.items())))
        self.written.append(self.log.record(self.api, method, full_url, json))
        return _RenderedRaw(200, self.responder(method, url, json))


class CloudSession:
    """What the GCP and ARM sessions share: the secrets they scrub (``Secrets``), the debug log, their
    HTTP clients and how a module builds one (``from_module``).

    A subclass sets ``LIBRARIES`` (``(present, pip name, import error)`` triples, needed outside render
    mode) and implements ``module_arguments(params)`` (its constructor's keyword arguments from the
    module's options) and ``login()`` (obtain a token now; CredentialsError naming where it failed).
    """

    LIBRARIES = ()
    secrets = None
    log = None
    render = False
    render_session = None  # the RenderSession of a render run (set by the subclass)

    def rendered(self):
        """The request files this session wrote in render mode, in order (none outside render mode)."""
        return list(self.render_session.written) if self.render_session is not None else []

    def _keep_run_settings(self, operation_timeout, render_dir, sleep, clock, log):
        """What every session keeps of its run: the operation deadline, render mode, the waiter's clock, the log."""
        self.operation_timeout = operation_timeout
        self.render = bool(render_dir)
        self.render_dir = render_dir
        self.sleep = sleep
        self.clock = clock
        self.waiter = Waiter(clock=clock, sleep=sleep)
        self.log = log

    def _http_client(self, session, max_retries, sleep, timeout, unauthorized_hint=None):
        return HttpClient(session, retry=RetryPolicy(max_retries=max_retries, sleep=sleep), timeout=timeout,
                          on_retry=self._log, secrets=self.secrets, unauthorized_hint=unauthorized_hint)

    def _log(self, message):
        if self.log:
            self.log(scrub(message, self.secrets or ()))

    @classmethod
    def module_arguments(cls, params):
        """The constructor's keyword arguments from the module's options."""
        raise NotImplementedError

    @classmethod
    def libraries(cls, kwargs):
        """The libraries this session needs, given the constructor's extra ``kwargs``."""
        del kwargs
        return cls.LIBRARIES

    def login(self):
        """Obtain a token before the first request, so that a failed login is reported as one."""

    @classmethod
    def from_module(cls, module, **kwargs):
        """A session from the module's options, logged in, and Ansible told to mask every form of every
        secret in whatever the module returns. ``module`` is a ``_contract.Context`` (or an AnsibleModule):
        its ``params``, ``debug`` and ``no_log_values``. A bad option or a refused login is an
        ``EngineError`` naming the option and the cause."""
        check_session_options(module, cls.libraries(kwargs))
        options = dict(session_options(module), secrets=Secrets(sink=getattr(module, "no_log_values", None)))
        options.update(kwargs)
        try:
            session = cls(**dict(cls.module_arguments(module.params), **options))
            if not session.render:
                session.login()
            return session
        except CredentialsError as exc:
            raise EngineError(str(exc))
