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

import json
import os
import random
import re
import threading
import time

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpu_ops.cluster.plugins.module_utils._args import SESSION_DEFAULTS
from ansible_collections.gpu_ops.cluster.plugins.module_utils._waiter import Waiter, WaitTimeout

try:
    from requests import exceptions as requests_exceptions

    HAS_REQUESTS = True
    TRANSIENT_ERRORS = (
        requests_exceptions.ConnectionError,
        requests_exceptions.ChunkedEncodingError,
        requests_exceptions.Timeout,
    )
except ImportError:  # pragma: no cover - reported by the module through missing_required_lib
    HAS_REQUESTS = False
    TRANSIENT_ERRORS = (ConnectionError,)

RETRY_STATUSES = frozenset((429, 500, 502, 503, 504))
MUTATING_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))


def check_session_options(module, libraries=()):
    """Fail ``module`` cleanly before any request: a missing library (not needed in render mode,
    which sends nothing) or a timeout / retry option out of range. ``libraries`` holds
    (present, pip name, import error) triples."""
    params = module.params
    if not params.get("render_dir"):
        for present, name, import_error in ((HAS_REQUESTS, "requests", None),) + tuple(libraries):
            if not present:
                module.fail_json(msg=missing_required_lib(name), exception=str(import_error) if import_error else None)
    for option in ("request_timeout", "operation_timeout"):
        if params.get(option) is not None and params[option] <= 0:
            module.fail_json(msg="%s must be greater than 0, got %s" % (option, params[option]))
    if params.get("max_retries") is not None and params["max_retries"] < 0:
        module.fail_json(msg="max_retries must be 0 or more, got %s" % params["max_retries"])


def session_options(module):
    """The keyword arguments every API session takes from the shared module options
    (timeouts, retries, render mode, debug log); an option left unset gets its default from
    ``_args.SESSION_SPEC``, the one place the defaults are written."""
    params = module.params
    options = dict((name, default if params.get(name) is None else params[name])
                   for name, default in SESSION_DEFAULTS.items())
    options["log"] = module.debug
    return options


class CredentialsError(Exception):
    """Credentials could not be obtained or used (GCP or Azure); the message never carries a secret."""


# what a token or key looks like in an error text: a bearer header, a Google access token, a JWT
# (Microsoft Entra tokens), a PEM private key (service-account keys)
_SECRET_SHAPES = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1********"),
    (re.compile(r"ya29\.[A-Za-z0-9._-]+"), "********"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), "********"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "********"),
)


def scrub(text, secrets):
    """``text`` with every secret, and anything shaped like a token or a private key, masked."""
    text = "%s" % (text,)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "********")
    for shape, mask in _SECRET_SHAPES:
        text = shape.sub(mask, text)
    return text


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

    def __init__(self, session, retry=None, timeout=SESSION_DEFAULTS["request_timeout"], on_retry=None):
        self.session = session
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.on_retry = on_retry

    def request(self, method, url, body=None, params=None, headers=None):
        """Send one request; returns a Response for 2xx, raises ApiError otherwise."""
        def attempt():
            try:
                raw = self.session.request(
                    method, url, json=body, params=params, headers=headers, timeout=self.timeout
                )
            except TRANSIENT_ERRORS as exc:
                return _Retry(type(exc).__name__, None, None)
            decoded = _decode(raw)
            if 200 <= raw.status_code < 300:
                return Response(raw.status_code, raw.headers, decoded)
            error = ApiError(raw.status_code, error_message(decoded, raw.text), method, url, decoded)
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
    """Numbered request files under ``<render_dir>/requests/``, continuing across module runs."""

    _lock = threading.Lock()

    def __init__(self, render_dir):
        self.folder = os.path.join(render_dir, "requests")

    def record(self, api, method, url, body):
        with self._lock:
            os.makedirs(self.folder, exist_ok=True)
            index = 1 + max([int(n.split("-", 1)[0]) for n in os.listdir(self.folder) if n[:3].isdigit()] or [0])
            name = "%03d-%s-%s-%s.json" % (index, api, method.lower(), _slug(url))
            path = os.path.join(self.folder, name)
            with open(path, "w") as handle:
                json.dump(dict(api=api, method=method, url=url, body=body), handle, indent=2, sort_keys=True)
                handle.write("\n")
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
