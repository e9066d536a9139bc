# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict, stateful double of the GKE (container v1/v1beta1) and Compute Engine (compute v1) APIs.

Start it (in-process, from pytest)::

    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

    with GcpDouble(latency=0.2) as gcp:          # HTTP server on 127.0.0.1, random port; < 0.3 s to start
        gcp.url                                   # "http://127.0.0.1:PORT/" - use as container_endpoint AND compute_endpoint
        gcp.token                                 # the bearer token it accepts (requests without it get 401)
        gcp.module_args(project="p")              # project/auth_kind/access_token/endpoints for a module or GcpSession(**...)

or as a process for ``ansible-playbook`` runs: ``python -m ansible_collections.gpu_ops.cluster.tests.doubles.gcp
--latency 0.5 --port-file /tmp/port`` (prints ``READY <url>`` and writes the port; SIGTERM stops it).

Script faults (in-process, or over HTTP for subprocess runs; the control paths need no token)::

    gcp.inject("429", method="POST", path="/global/networks$", count=2, retry_after=1)
    gcp.inject("503", path="subnetworks", count=3)
    gcp.inject("reset", method="GET", path="firewalls/", count=1)      # socket closed without a response
    gcp.inject("op_error", path="/global/firewalls$", count=1, message="QUOTA_EXCEEDED")  # op ends DONE + error
    gcp.inject("status", status=500, count=1) / gcp.inject("delay", delay=2.0, count=1)
    gcp.inject("echo_auth", status=401)   # an error quoting the Authorization header (or, on /token, the
                                          # assertion) back in every form (tests/doubles/hostile.py)
    # skip=N lets the first N matching requests through before the fault fires
    POST /_double/faults {"kind": "429", "method": "POST", "path": "networks", "count": 2, "retry_after": 1}
    DELETE /_double/faults   GET /_double/faults   POST /_double/latency {"seconds": 0.5}

Read the request log (control paths and nothing else are left out)::

    gcp.requests                  # [{seq, method, path, query, body, status, mutating}, ...]
    gcp.mutating_requests()       # POST/PUT/PATCH/DELETE, operation ``wait`` calls left out
    gcp.read_counts()             # Counter of GET paths of resources (operations left out)
    gcp.clear_log()               # GET/DELETE /_double/log over HTTP
    gcp.state(project)            # {"networks": [...], "subnetworks": [...], ...} ; GET /_double/state?project=p
    gcp.edit(path, {"mtu": 1460}) # change a resource "by hand" (drift); POST /_double/edit {"path":..., "set": {...}}

Behaviour (chosen to match the real APIs as far as they are documented):
- Every request body and query string is validated against the discovery documents shipped in
  google-api-python-client (tests/contract/discovery.py): unknown fields, JSON types, enums and int64-as-string
  give 400 INVALID_ARGUMENT naming the field. Unknown URLs give 404.
- Compute: insert/patch/delete return an Operation (``compute#operation``, global or regional) that is RUNNING
  for ``latency`` seconds, then DONE. The effect is applied when the operation finishes: a new network, subnet
  or firewall is visible to GET only once its insert is DONE (a GET before that is 404; inserting the same name
  again is 409 alreadyExists); a deleted resource stays readable until its delete is DONE. ``wait`` blocks until
  the operation is DONE or ``wait_max`` seconds passed (real: about 2 minutes). A subnet or firewall that refers to
  a network whose insert is still running gets 400 resourceNotReady.
- Compute checks: network name pattern, ``autoCreateSubnetworks`` must be set, MTU 1300-8896 (default 1460);
  network PATCH changes ``routingConfig`` and ``mtu`` only (``gcloud compute networks update --mtu``); subnet CIDR
  must be a valid network address (/8-/29) and must not overlap another subnet (primary or secondary) of the same
  network; subnet PATCH needs the current ``fingerprint`` and cannot change ``ipCidrRange`` (use
  ``expandIpCidrRange``, which only grows a range); firewall needs an existing network (400 otherwise), ``allowed``
  or ``denied``, valid protocols/ports/CIDRs, and defaults ``sourceRanges`` to 0.0.0.0/0 for an INGRESS rule
  without sources (as the real API does). Deleting a network that still has subnets or firewalls is 400
  resourceInUseByAnotherResource.
- RoCE networks (https://cloud.google.com/vpc/docs/rdma-network-profiles): ``networkProfiles.get``/``list`` serve
  ``<zone>-vpc-roce`` for the catalog's RoCE zones (``gcp_catalog.ROCE_ZONES``; 404 elsewhere or once withdrawn);
  ``Network.networkProfile`` must be such a profile's URL (404 for a missing one, 400 for a malformed one or with
  auto-mode subnets) and is set at creation only; a RoCE network's subnets must be in its zone's region, it takes no
  VPC firewall rule (https://cloud.google.com/firewall/docs/firewall-for-roce), and a node pool attaches to it only
  with an MRDMA machine (A3 Ultra, A4, A4X) in the profile's zone, several NICs in the one network allowed. A node pool
  with ``gpuDirectConfig.gpuDirectStrategy: RDMA`` needs a3-ultragpu-8g or a4-highgpu-8g (the enum's documented
  scope); a4x-highgpu-4g takes Hyperdisk boot disks only (GKE's pd-balanced default included).
- Container: clusters and node pools are visible at once with status PROVISIONING (RECONCILING for updates,
  STOPPING for deletes) and become RUNNING (or disappear) when the operation is DONE. One operation per cluster at
  a time (400 FAILED_PRECONDITION otherwise). Multi-networking needs ADVANCED_DATAPATH and IP aliases; a node pool
  with additional node networks needs a multi-networking cluster and existing networks/subnets in the cluster's
  region. Operations live under ``v1`` and ``v1beta1`` ``projects/*/locations/*/operations/*``; their ``name`` is
  the short id and ``location``/``zone`` say where to poll.
- Locations and offers are state (``double.catalog``, tests/doubles/gcp_catalog.py): ``regions.get``,
  ``zones.get``, ``machineTypes.get``, ``acceleratorTypes.get`` and ``diskTypes.get`` answer 404 for what the
  catalog does not hold or a test withdrew; ``getServerConfig`` is 404 for an unknown location and lists the
  catalog's image types. Writes consult the same catalog: a subnet in an unknown region is 400 "Unknown region",
  a cluster in an unknown location 404, a node pool whose machine, accelerator (type, or count above the most
  cards per instance), disk or image type is not offered in its zones 400.
- Every API request needs ``Authorization: Bearer <token>`` (401 UNAUTHENTICATED otherwise).
- ``POST /token`` is an OAuth 2.0 token endpoint for service-account keys made by ``service_account_key()``
  (their ``token_uri``): it checks the JWT-bearer assertion's RS256 signature, ``iss``, ``aud`` and ``exp``
  as Google's does, and answers ``token`` (400 invalid_grant otherwise, quoting the request back for a key
  made with ``echo_login``).

What it does not do (so do not rely on it for these): IAM permissions and quotas (script them with
``op_error`` / ``status`` faults), zonal compute resources (other than the catalog reads) and operations, list paging and ``filter``/``fields``,
``requestId`` de-duplication, auto-mode subnet creation, peering and routes, legacy ``zones/*`` GKE paths,
cluster and node-pool update semantics beyond copying ``desired*`` / UpdateNodePoolRequest fields onto the stored
resource, node counts and instance groups, project numbers in self links of compute resources, and the
request-level "not ready" windows the real API has right after a create (only the resourceNotReady of a
network whose insert is still running is modelled).
"""

from __future__ import annotations

import argparse
import base64
import collections
import copy
import datetime
import ipaddress
import itertools
import json
import random
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from ansible_collections.gpu_ops.cluster.tests.contract.discovery import discovery
from ansible_collections.gpu_ops.cluster.tests.doubles import gcp_catalog
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp_catalog import Catalog
from ansible_collections.gpu_ops.cluster.tests.doubles.hostile import echo

SELF_LINK_HOST = "https://www.googleapis.com/"
CONTAINER_SELF_LINK_HOST = "https://container.googleapis.com/"
DEFAULT_TOKEN = "double-token-5f1c0e"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
PROJECT_NUMBER = "123456789012"
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
MUTATING = frozenset(("POST", "PUT", "PATCH", "DELETE"))
DEFAULT_GKE_VERSIONS = ["1.32.2-gke.1489001", "1.31.1-gke.2008000", "1.30.4-gke.1129000", "1.29.6-gke.1254000"]
FAULT_KINDS = ("429", "503", "status", "reset", "op_error", "delay", "echo_auth")
IP_PROTOCOLS = ("tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all")


class ApiFailure(Exception):
    """An error answer of the double: HTTP status, google.rpc status, message, compute reason."""

    def __init__(self, http_status, status, message, reason=None, headers=None):
        super().__init__(message)
        self.http_status = http_status
        self.status = status
        self.message = message
        self.reason = reason or status.lower()
        self.headers = headers or {}

    def document(self):
        return {"error": {"code": self.http_status, "message": self.message, "status": self.status,
                          "errors": [{"message": self.message, "domain": "global", "reason": self.reason}]}}


def bad_request(message, reason="invalid"):
    return ApiFailure(400, "INVALID_ARGUMENT", message, reason)


def not_found(what):
    return ApiFailure(404, "NOT_FOUND", "The resource '%s' was not found" % what, "notFound")


def already_exists(what):
    return ApiFailure(409, "ALREADY_EXISTS", "The resource '%s' already exists" % what, "alreadyExists")


def not_ready(what):
    return ApiFailure(400, "FAILED_PRECONDITION", "The resource '%s' is not ready" % what, "resourceNotReady")


class Fault:
    """One scripted fault."""

    _ids = itertools.count(1)

    def __init__(self, kind, method="*", path="", count=1, retry_after=None, status=None, message=None,
                 skip=0, delay=0.0):
        if kind not in FAULT_KINDS:
            raise ValueError("fault kind must be one of %s" % ", ".join(FAULT_KINDS))
        self.id = next(self._ids)
        self.kind = kind
        self.method = (method or "*").upper()
        self.path = path or ""
        self.regex = re.compile(self.path)
        self.count = int(count)
        self.retry_after = retry_after
        self.status = status
        self.message = message
        self.skip = int(skip)
        self.delay = float(delay or 0.0)
        self.fired = 0

    def matches(self, method, path):
        return (self.method in ("*", method)) and bool(self.regex.search(path))

    def as_dict(self):
        return dict(id=self.id, kind=self.kind, method=self.method, path=self.path, count=self.count,
                    retry_after=self.retry_after, status=self.status, message=self.message, skip=self.skip,
                    delay=self.delay, fired=self.fired)


def _now_text(compute=True):
    now = datetime.datetime.now(datetime.timezone.utc)
    if compute:
        return now.astimezone(datetime.timezone(datetime.timedelta(hours=-7))).isoformat(timespec="milliseconds")
    return now.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _uint64_id():
    return str(random.getrandbits(63))


def _last(url):
    return (url or "").rstrip("/").split("/")[-1]


class Operation:
    """A long-running operation of either API."""

    def __init__(self, api, document, done_at, effect, error=None, scope=None, cluster_key=None):
        self.api = api  # "compute" | "container"
        self.document = document
        self.done_at = done_at
        self.effect = effect  # callable applied once when DONE (None: nothing)
        self.error = error  # (http status, code, message) when the op is to fail
        self.scope = scope  # compute: "global" | "regions/<r>"; container: "<location>"
        self.cluster_key = cluster_key
        self.done = False


class GcpDouble:
    """The double. See the module docstring."""

    def __init__(self, latency=0.0, token=DEFAULT_TOKEN, wait_max=120.0, validate=True, latency_for=None,
                 gke_versions=None, catalog=None):
        self.latency = float(latency)
        self.latency_for = dict(latency_for or {})  # operationType -> seconds
        self.token = token
        self.wait_max = float(wait_max)
        self.validate = validate
        self.gke_versions = list(gke_versions or DEFAULT_GKE_VERSIONS)
        self.catalog = catalog or Catalog()  # regions, zones and what each zone offers (gcp_catalog)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.faults = []
        self.requests = []
        self.keys = {}  # service-account email -> RSA public key
        self.echo_accounts = set()
        self.token_requests = []
        self._seq = itertools.count(1)
        self.projects = {}
        self.operations = {}  # (api, project, scope, name) -> Operation
        self._server = None
        self._thread = None
        self._timers = []
        self.url = None
        self.port = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, port=0):
        # load the discovery documents up front so the first request is not slow
        if self.validate:
            discovery("compute", "v1")
            discovery("container", "v1")
            discovery("container", "v1beta1")
        handler = _handler_class(self)
        self._server = _Server(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = "http://127.0.0.1:%d/" % self.port
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs=dict(poll_interval=0.05),
                                        name="gcp-double", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.lock:
            self.changed.notify_all()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def container_endpoint(self):
        return self.url

    @property
    def compute_endpoint(self):
        return self.url

    def module_args(self, project="test-project", **extra):
        args = dict(project=project, auth_kind="accesstoken", access_token=self.token,
                    container_endpoint=self.url, compute_endpoint=self.url)
        args.update(extra)
        return args

    # ------------------------------------------------------------------ service-account keys

    def service_account_key(self, project="test-project", name="gpu-ops", echo_login=False):
        """A new service-account key (the JSON ``gcloud iam service-accounts keys create`` writes) whose
        ``token_uri`` is this double's token endpoint; with ``echo_login`` its logins are refused, quoting the
        request back in every form (tests/doubles/hostile.py)."""
        from cryptography.hazmat.primitives import serialization  # pylint: disable=import-outside-toplevel
        from cryptography.hazmat.primitives.asymmetric import rsa  # pylint: disable=import-outside-toplevel

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        email = "%s@%s.iam.gserviceaccount.com" % (name, project)
        key_id = "%040x" % random.getrandbits(160)
        with self.lock:
            self.keys[email] = key.public_key()
            if echo_login:
                self.echo_accounts.add(email)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode("ascii")
        return dict(type="service_account", project_id=project, private_key_id=key_id, private_key=pem,
                    client_email=email, client_id=str(random.getrandbits(64)), token_uri=self.url + "token",
                    auth_uri="https://accounts.google.com/o/oauth2/auth")

    def _token_endpoint(self, method, body_bytes):
        """OAuth 2.0 JWT-bearer grant: the assertion must be signed by a key of ``service_account_key()``."""
        form = dict(parse_qsl((body_bytes or b"").decode("utf-8", "replace")))
        with self.lock:
            self.token_requests.append(form)
            fault = self._take_fault(method, "/token", kinds=("echo_auth",))
        problem, issuer = self._check_assertion(method, form)
        if (fault is not None and fault.kind == "echo_auth") or issuer in self.echo_accounts:
            return int(getattr(fault, "status", None) or 400), {}, dict(
                error="invalid_grant", error_description=echo(json.dumps(form))), None
        if problem:
            return 400, {}, dict(error="invalid_grant", error_description=problem), None
        return 200, {}, dict(access_token=self.token, expires_in=3599, token_type="Bearer"), None

    def _check_assertion(self, method, form):
        from cryptography.exceptions import InvalidSignature  # pylint: disable=import-outside-toplevel
        from cryptography.hazmat.primitives import hashes  # pylint: disable=import-outside-toplevel
        from cryptography.hazmat.primitives.asymmetric import padding  # pylint: disable=import-outside-toplevel

        if method != "POST" or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return "unsupported grant_type", None
        parts = form.get("assertion", "").split(".")
        if len(parts) != 3:
            return "Invalid JWT: the assertion is not a signed JWT", None
        try:
            claims = json.loads(_b64url(parts[1]))
            signature = _b64url(parts[2])
        except ValueError:
            return "Invalid JWT: cannot decode", None
        with self.lock:
            public_key = self.keys.get(claims.get("iss"))
        if public_key is None:
            return "Invalid grant: account not found", claims.get("iss")
        try:
            public_key.verify(signature, ("%s.%s" % (parts[0], parts[1])).encode("ascii"), padding.PKCS1v15(),
                              hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature.", claims.get("iss")
        # google-auth always names Google's token endpoint as the audience, whatever the key's token_uri
        if claims.get("aud") not in (GOOGLE_TOKEN_URI, self.url + "token") or float(claims.get("exp", 0)) < time.time():
            return ("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.",
                    claims.get("iss"))
        return None, claims.get("iss")

    # ------------------------------------------------------------------ test controls

    def inject(self, kind, method="*", path="", count=1, retry_after=None, status=None, message=None, skip=0,
               delay=0.0):
        """Script a fault; returns its id."""
        fault = Fault(kind, method, path, count, retry_after, status, message, skip, delay)
        with self.lock:
            self.faults.append(fault)
        return fault.id

    def clear_faults(self):
        with self.lock:
            self.faults = []

    def pending_faults(self):
        with self.lock:
            return [f.as_dict() for f in self.faults if f.count > 0]

    def set_latency(self, seconds, operation_type=None):
        with self.lock:
            if operation_type:
                self.latency_for[operation_type] = float(seconds)
            else:
                self.latency = float(seconds)

    def clear_log(self):
        with self.lock:
            self.requests = []

    def mutating_requests(self):
        with self.lock:
            return [r for r in self.requests if r["mutating"]]

    def read_counts(self):
        """How often each resource path was read (GET), operations left out."""
        with self.lock:
            return collections.Counter(
                r["path"] for r in self.requests if r["method"] == "GET" and "/operations/" not in r["path"])

    def state(self, project="test-project"):
        """Visible resources of a project, by collection."""
        with self.lock:
            self._advance()
            store = self._project(project)
            return {kind: [copy.deepcopy(doc) for key, doc in sorted(items.items())]
                    for kind, items in store.items() if not kind.startswith("_")}

    def resource(self, path):
        """The stored document at an API path (``compute/v1/projects/...`` or ``v1/projects/...``), or None."""
        with self.lock:
            self._advance()
            found = self._locate(path)
            return copy.deepcopy(found[0][found[1]]) if found else None

    def edit(self, path, changes):
        """Change a stored resource by hand, without an operation (drift). ``None`` values remove a field."""
        with self.lock:
            self._advance()
            found = self._locate(path)
            if not found:
                raise KeyError(path)
            doc = found[0][found[1]]
            for key, value in changes.items():
                if value is None:
                    doc.pop(key, None)
                else:
                    doc[key] = copy.deepcopy(value)
            if "fingerprint" in doc:
                doc["fingerprint"] = _fingerprint()
            return copy.deepcopy(doc)

    def wait_idle(self, timeout=30.0):
        """Block until no operation is running (for test cleanup/assertions)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                self._advance()
                running = [op for op in self.operations.values() if not op.done]
                if not running:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, max(0.01, min(op.done_at for op in running) - time.monotonic())))

    def _locate(self, path):
        path = urlsplit(path).path.lstrip("/")
        match = re.match(r"^compute/v1/projects/([^/]+)/(.+)$", path)
        if match:
            project, rest = match.groups()
            store = self._project(project)
            for kind, pattern in (("networks", r"^global/networks/([^/]+)$"),
                                  ("firewalls", r"^global/firewalls/([^/]+)$"),
                                  ("subnetworks", r"^regions/([^/]+)/subnetworks/([^/]+)$"),
                                  ("resourcePolicies", r"^regions/([^/]+)/resourcePolicies/([^/]+)$")):
                m = re.match(pattern, rest)
                if m:
                    key = "/".join(m.groups())
                    return (store[kind], key) if key in store[kind] else None
            return None
        match = re.match(r"^v1(?:beta1)?/projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)(?:/nodePools/([^/]+))?$",
                         path)
        if match:
            project, location, cluster, pool = match.groups()
            store = self._project(project)
            if pool:
                key = "%s/%s/%s" % (location, cluster, pool)
                return (store["nodePools"], key) if key in store["nodePools"] else None
            key = "%s/%s" % (location, cluster)
            return (store["clusters"], key) if key in store["clusters"] else None
        return None

    # ------------------------------------------------------------------ state helpers

    def _project(self, project):
        if project not in self.projects:
            self.projects[project] = dict(networks={}, subnetworks={}, firewalls={}, resourcePolicies={},
                                          clusters={}, nodePools={}, _pending={}, _deleting={})
        return self.projects[project]

    def _latency(self, operation_type):
        return self.latency_for.get(operation_type, self.latency)

    def _advance(self):
        """Finish every operation whose time has come (in order), applying its effect once."""
        now = time.monotonic()
        due = sorted((op for op in self.operations.values() if not op.done and op.done_at <= now),
                     key=lambda o: o.done_at)
        for op in due:
            self._finish(op)
        if due:
            self.changed.notify_all()

    def _finish(self, op):
        op.done = True
        doc = op.document
        doc["status"] = "DONE"
        if op.api == "compute":
            doc["progress"] = 100
            doc["endTime"] = _now_text()
            if op.error:
                status, code, message = op.error
                doc["httpErrorStatusCode"] = status
                doc["httpErrorMessage"] = {400: "BAD REQUEST", 403: "FORBIDDEN", 500: "INTERNAL SERVER ERROR"}.get(
                    status, "ERROR")
                doc["error"] = {"errors": [{"code": code, "message": message}]}
        else:
            doc["endTime"] = _now_text(compute=False)
            doc["progress"] = {"status": "DONE"}
            if op.error:
                status, code, message = op.error
                doc["error"] = {"code": 13 if status >= 500 else 9, "message": message}
                doc["statusMessage"] = message
        if op.effect:
            op.effect(op.error is None)

    def _new_operation(self, api, project, scope, operation_type, target_link, effect, target_id=None,
                       cluster_key=None):
        name = "operation-%d-%s" % (int(time.time() * 1000), "%012x" % random.getrandbits(48))
        error = None
        fault = self._take_fault_op_error()
        if fault:
            error = (fault.status or 400, "OPERATION_FAILED_BY_DOUBLE", fault.message or "injected operation error")
        if api == "compute":
            if scope == "global":
                self_link = "%scompute/v1/projects/%s/global/operations/%s" % (SELF_LINK_HOST, project, name)
            else:
                self_link = "%scompute/v1/projects/%s/%s/operations/%s" % (SELF_LINK_HOST, project, scope, name)
            doc = dict(kind="compute#operation", id=_uint64_id(), name=name, operationType=operation_type,
                       targetLink=target_link, targetId=target_id or _uint64_id(), status="RUNNING",
                       user="double@example.com", progress=0, insertTime=_now_text(), startTime=_now_text(),
                       selfLink=self_link)
            if scope != "global":
                doc["region"] = "%scompute/v1/projects/%s/%s" % (SELF_LINK_HOST, project, scope)
        else:
            doc = dict(name=name, zone=scope, location=scope, operationType=operation_type, status="RUNNING",
                       selfLink="%sv1/projects/%s/locations/%s/operations/%s" % (
                           CONTAINER_SELF_LINK_HOST, PROJECT_NUMBER, scope, name),
                       targetLink=target_link, startTime=_now_text(compute=False))
        op = Operation(api, doc, time.monotonic() + self._latency(operation_type), effect, error, scope, cluster_key)
        self.operations[(api, project, scope, name)] = op
        timer = threading.Timer(max(0.0, op.done_at - time.monotonic()) + 0.001, self._tick)
        timer.daemon = True
        timer.start()
        return op

    def _tick(self):
        with self.lock:
            self._advance()

    def _take_fault_op_error(self):
        method, path = self._current
        for fault in self.faults:
            if fault.kind == "op_error" and fault.count > 0 and fault.matches(method, path):
                if fault.skip > 0:
                    fault.skip -= 1
                    continue
                fault.count -= 1
                fault.fired += 1
                return fault
        return None

    # ------------------------------------------------------------------ request entry point

    def handle(self, method, raw_path, headers, body_bytes):
        """(status, headers, document or None, action) for one request; action may be 'reset'."""
        split = urlsplit(raw_path)
        path = split.path
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        if path.startswith("/_double/"):
            return self._control(method, path, query, body_bytes)
        if path == "/token":
            return self._token_endpoint(method, body_bytes)
        body = None
        entry = dict(seq=next(self._seq), time=time.time(), method=method, path=path, query=query, body=None,
                     status=None, mutating=method in MUTATING and not path.endswith("/wait"))
        with self.lock:
            self.requests.append(entry)
            fault = self._take_fault(method, path)
        if body_bytes:
            try:
                body = json.loads(body_bytes.decode("utf-8"))
            except ValueError:
                entry["body"] = body_bytes.decode("utf-8", "replace")
                entry["status"] = 400
                return 400, {}, bad_request("Invalid JSON payload received.").document(), None
        entry["body"] = body
        if fault is not None:
            if fault.kind == "echo_auth":
                status = int(fault.status or 401)
                entry["status"] = status
                return status, {}, ApiFailure(status, "UNAUTHENTICATED" if status == 401 else "INTERNAL",
                                              echo(headers.get("Authorization") or ""), "authError").document(), None
            if fault.kind == "delay":
                time.sleep(fault.delay)
            elif fault.kind == "reset":
                entry["status"] = "reset"
                return None, {}, None, "reset"
            else:
                status = 429 if fault.kind == "429" else (503 if fault.kind == "503" else int(fault.status or 500))
                rpc = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
                extra = {}
                if fault.retry_after is not None:
                    extra["Retry-After"] = str(fault.retry_after)
                failure = ApiFailure(status, rpc, fault.message or "injected %s by the double" % status,
                                     "rateLimitExceeded" if status == 429 else "backendError")
                entry["status"] = status
                return status, extra, failure.document(), None
        auth = headers.get("Authorization") or ""
        if auth != "Bearer %s" % self.token:
            entry["status"] = 401
            failure = ApiFailure(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. "
                                 "Expected OAuth 2 access token.", "authError")
            return 401, {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'}, failure.document(), None
        try:
            result = self._dispatch(method, path.lstrip("/"), query, body)
            entry["status"] = 200
            return 200, {}, result, None
        except ApiFailure as failure:
            entry["status"] = failure.http_status
            return failure.http_status, failure.headers, failure.document(), None

    def _take_fault(self, method, path, kinds=None):
        # every matching fault counts the request against its ``skip``; the first ready one fires
        chosen = None
        for fault in self.faults:
            if fault.kind == "op_error" or fault.count <= 0 or not fault.matches(method, path):
                continue
            if kinds is not None and fault.kind not in kinds:
                continue
            if fault.skip > 0:
                fault.skip -= 1
                continue
            if chosen is None:
                chosen = fault
        if chosen is not None:
            chosen.count -= 1
            chosen.fired += 1
        return chosen

    def _control(self, method, path, query, body_bytes):
        try:
            body = json.loads(body_bytes.decode("utf-8")) if body_bytes else {}
        except ValueError:
            return 400, {}, {"error": "invalid JSON"}, None
        try:
            if path == "/_double/faults" and method == "POST":
                faults = body if isinstance(body, list) else [body]
                return 200, {}, {"ids": [self.inject(**f) for f in faults]}, None
            if path == "/_double/faults" and method == "DELETE":
                self.clear_faults()
                return 200, {}, {}, None
            if path == "/_double/faults" and method == "GET":
                return 200, {}, {"faults": self.pending_faults()}, None
            if path == "/_double/log" and method == "GET":
                with self.lock:
                    return 200, {}, {"requests": copy.deepcopy(self.requests)}, None
            if path == "/_double/log" and method == "DELETE":
                self.clear_log()
                return 200, {}, {}, None
            if path == "/_double/state" and method == "GET":
                return 200, {}, self.state(query.get("project", "test-project")), None
            if path == "/_double/latency" and method == "POST":
                self.set_latency(body.get("seconds", 0.0), body.get("operation_type"))
                return 200, {}, {}, None
            if path == "/_double/edit" and method == "POST":
                return 200, {}, self.edit(body["path"], body.get("set") or {}), None
            if path == "/_double/idle" and method == "POST":
                return 200, {}, {"idle": self.wait_idle(float(body.get("timeout", 30)))}, None
        except (KeyError, TypeError, ValueError) as exc:
            return 400, {}, {"error": "%s: %s" % (type(exc).__name__, exc)}, None
        return 404, {}, {"error": "no control endpoint %s %s" % (method, path)}, None

    def _dispatch(self, method, path, query, body):
        if path.startswith("compute/v1/"):
            api = discovery("compute", "v1")
        elif path.startswith("v1beta1/"):
            api = discovery("container", "v1beta1")
        elif path.startswith("v1/"):
            api = discovery("container", "v1")
        else:
            raise ApiFailure(404, "NOT_FOUND", "The requested URL /%s was not found on this server." % path,
                             "notFound")
        api_method = api.match(method, path)
        if api_method is None:
            raise ApiFailure(404, "NOT_FOUND", "The requested URL /%s was not found on this server." % path,
                             "notFound")
        if self.validate:
            problems = api.validate_request(method, path, body, query)
            if problems:
                raise bad_request("Invalid request to %s: %s" % (api_method.id, "; ".join(problems)))
        params = api_method.regex.match(path).groupdict()
        handler = _HANDLERS.get(api_method.id.split(".", 1)[1] if api_method.id.startswith("container.")
                                else api_method.id)
        if handler is None:
            raise ApiFailure(501, "UNIMPLEMENTED", "the double does not implement %s" % api_method.id, "notImplemented")
        with self.lock:
            self._advance()
            self._current = (method, "/" + path)
            return handler(self, params, body or {}, query)

    _current = ("", "")

    # ------------------------------------------------------------------ compute helpers

    def _compute_link(self, project, rest):
        return "%scompute/v1/projects/%s/%s" % (SELF_LINK_HOST, project, rest)

    def _network_key(self, project, reference, field="resource.network"):
        """Name of the network a body refers to (URL, partial URL or name) - 400 if malformed."""
        if not reference:
            raise bad_request("Invalid value for field '%s': ''. The network is required." % field)
        match = re.search(r"(?:^|/)(?:projects/([^/]+)/)?global/networks/([^/]+)$", reference)
        if match:
            if match.group(1) and match.group(1) != project:
                raise bad_request("Invalid value for field '%s': '%s'. Cross-project references are not "
                                  "supported by the double." % (field, reference))
            return match.group(2)
        if NAME_RE.match(reference):
            return reference
        raise bad_request("Invalid value for field '%s': '%s'. The URL is malformed." % (field, reference))

    def _require_network(self, store, project, name, field="resource.network"):
        if name in store["networks"]:
            if ("networks", name) in store["_deleting"]:
                raise not_ready("projects/%s/global/networks/%s" % (project, name))
            return store["networks"][name]
        if ("networks", name) in store["_pending"]:
            raise not_ready("projects/%s/global/networks/%s" % (project, name))
        raise bad_request("Invalid value for field '%s': '%s'. The referenced network resource cannot be found."
                          % (field, self._compute_link(project, "global/networks/%s" % name)), "invalid")

    def _reserve(self, store, kind, key, what):
        if key in store[kind] or (kind, key) in store["_pending"]:
            raise already_exists(what)
        store["_pending"][(kind, key)] = True

    def _subnet_ranges(self, store, network_name, skip_key=None):
        ranges = []
        for key, subnet in store["subnetworks"].items():
            if key == skip_key or _last(subnet["network"]) != network_name:
                continue
            ranges.append((subnet["name"], subnet["ipCidrRange"]))
            for secondary in subnet.get("secondaryIpRanges") or []:
                ranges.append((subnet["name"], secondary.get("ipCidrRange")))
        for (kind, key), pending in store["_pending"].items():
            if kind == "subnetworks" and isinstance(pending, dict) and key != skip_key \
                    and _last(pending["network"]) == network_name:
                ranges.append((pending["name"], pending["ipCidrRange"]))
        return ranges

    def _delete_with_op(self, store, project, kind, key, scope, target_link, check=None):
        if key not in store[kind]:
            if (kind, key) in store["_pending"]:
                raise not_ready(target_link.split("/compute/v1/", 1)[-1])
            raise not_found(target_link.split("/compute/v1/", 1)[-1])
        if (kind, key) in store["_deleting"]:
            raise not_ready(target_link.split("/compute/v1/", 1)[-1])
        if check:
            check()
        store["_deleting"][(kind, key)] = True

        def effect(ok):
            store["_deleting"].pop((kind, key), None)
            if ok:
                doc = store[kind].pop(key, None)
                if kind == "subnetworks" and doc:
                    network = store["networks"].get(_last(doc["network"]))
                    if network and doc["selfLink"] in network.get("subnetworks", []):
                        network["subnetworks"].remove(doc["selfLink"])

        op = self._new_operation("compute", project, scope, "delete", target_link, effect,
                                 target_id=store[kind][key].get("id"))
        return copy.deepcopy(op.document)

    def _insert_with_op(self, store, project, kind, key, scope, doc, pending=True):
        store["_pending"][(kind, key)] = doc if pending else True

        def effect(ok):
            store["_pending"].pop((kind, key), None)
            if ok:
                doc["creationTimestamp"] = _now_text()
                store[kind][key] = doc
                if kind == "subnetworks":
                    network = store["networks"].get(_last(doc["network"]))
                    if network is not None:
                        network.setdefault("subnetworks", []).append(doc["selfLink"])

        op = self._new_operation("compute", project, scope, "insert", doc["selfLink"], effect, target_id=doc["id"])
        return copy.deepcopy(op.document)

    def _update_with_op(self, project, scope, target, operation_type, apply):
        def effect(ok):
            if ok:
                apply()

        op = self._new_operation("compute", project, scope, operation_type, target["selfLink"], effect,
                                 target_id=target.get("id"))
        return copy.deepcopy(op.document)

    # ------------------------------------------------------------------ container helpers

    def _cluster(self, store, project, location, name):
        key = "%s/%s" % (location, name)
        if key not in store["clusters"]:
            raise ApiFailure(404, "NOT_FOUND", "Not found: projects/%s/locations/%s/clusters/%s." % (
                project, location, name), "notFound")
        return key, store["clusters"][key]

    def _cluster_busy(self, project, cluster_key):
        for (api, proj, dummy, dummy2), op in self.operations.items():
            if api == "container" and proj == project and not op.done and op.cluster_key == cluster_key:
                raise ApiFailure(400, "FAILED_PRECONDITION", "Operation %s is currently operating on cluster %s. "
                                 "Please wait and try again once it is done." % (op.document["name"],
                                                                                 cluster_key.split("/")[-1]),
                                 "failedPrecondition")

    def _container_op(self, project, location, operation_type, target_link, effect, cluster_key):
        op = self._new_operation("container", project, location, operation_type, target_link, effect,
                                 cluster_key=cluster_key)
        return copy.deepcopy(op.document)


def _b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _fingerprint():
    return "%016x" % random.getrandbits(64)


def _cidr(value, field):
    try:
        network = ipaddress.ip_network(value, strict=False)
    except (TypeError, ValueError):
        raise bad_request("Invalid value for field '%s': '%s'. Invalid IPCidrRange." % (field, value)) from None
    if "/" not in str(value) or network.version != 4:
        raise bad_request("Invalid value for field '%s': '%s'. Invalid IPCidrRange." % (field, value))
    if str(network) != str(value):
        raise bad_request("Invalid value for field '%s': '%s'. The IP range is not a valid network address "
                          "(the host bits must be zero, e.g. %s)." % (field, value, network))
    return network


# ---------------------------------------------------------------------- compute handlers

def _networks_insert(double, params, body, query):
    project = params["project"]
    store = double._project(project)
    name = body.get("name") or ""
    if not NAME_RE.match(name):
        raise bad_request("Invalid value for field 'resource.name': '%s'. Must be a match of regex "
                          "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
    if "autoCreateSubnetworks" not in body and "IPv4Range" not in body:
        raise bad_request("Invalid value for field 'resource.autoCreateSubnetworks': ''. Legacy networks are "
                          "no longer supported; set autoCreateSubnetworks.")
    mtu = body.get("mtu", 1460)
    if not 1300 <= mtu <= 8896:
        raise bad_request("Invalid value for field 'resource.mtu': '%s'. The MTU must be between 1300 and 8896."
                          % mtu)
    profile = None
    if body.get("networkProfile"):
        match = re.search(r"(?:^|/)projects/([^/]+)/global/networkProfiles/([^/]+)$", body["networkProfile"])
        if not match:
            raise bad_request("Invalid value for field 'resource.networkProfile': '%s'. Must be a URL of a network "
                              "profile (projects/{project}/global/networkProfiles/{name})." % body["networkProfile"])
        profile = double.catalog.network_profile_document(match.group(1), match.group(2))
        if profile is None:
            raise not_found("projects/%s/global/networkProfiles/%s" % (match.group(1), match.group(2)))
        if body.get("autoCreateSubnetworks"):
            raise bad_request("Invalid value for field 'resource.autoCreateSubnetworks': 'true'. Network profile %s "
                              "does not allow auto mode subnets." % profile["name"])
    routing = copy.deepcopy(body.get("routingConfig") or {})
    routing.setdefault("routingMode", "REGIONAL")
    double._reserve(store, "networks", name, "projects/%s/global/networks/%s" % (project, name))
    store["_pending"].pop(("networks", name))
    doc = copy.deepcopy(body)
    net_id = _uint64_id()
    doc.update(kind="compute#network", id=net_id, mtu=mtu, routingConfig=routing,
               selfLink=double._compute_link(project, "global/networks/%s" % name),
               selfLinkWithId=double._compute_link(project, "global/networks/%s" % net_id),
               networkFirewallPolicyEnforcementOrder=body.get("networkFirewallPolicyEnforcementOrder")
               or "AFTER_CLASSIC_FIREWALL")
    if doc.get("autoCreateSubnetworks"):
        doc["subnetworks"] = []
    if profile is not None:
        doc["networkProfile"] = profile["selfLink"]
    return double._insert_with_op(store, project, "networks", name, "global", doc)


def _roce_zone(network):
    """The zone of a RoCE network's profile (None for an ordinary network)."""
    name = _last((network or {}).get("networkProfile"))
    return name[:-len("-vpc-roce")] if name and name.endswith("-vpc-roce") else None


def _network_profiles_get(double, params, body, query):
    doc = double.catalog.network_profile_document(params["project"], params["networkProfile"])
    if doc is None:
        raise not_found("projects/%s/global/networkProfiles/%s" % (params["project"], params["networkProfile"]))
    return doc


def _network_profiles_list(double, params, body, query):
    return dict(kind="compute#networkProfileList", items=double.catalog.network_profiles(params["project"]),
                selfLink=double._compute_link(params["project"], "global/networkProfiles"))


def _networks_get(double, params, body, query):
    store = double._project(params["project"])
    name = params["network"]
    if name not in store["networks"]:
        raise not_found("projects/%s/global/networks/%s" % (params["project"], name))
    return copy.deepcopy(store["networks"][name])


def _networks_list(double, params, body, query):
    store = double._project(params["project"])
    return dict(kind="compute#networkList", items=[copy.deepcopy(n) for k, n in sorted(store["networks"].items())],
                selfLink=double._compute_link(params["project"], "global/networks"))


def _networks_patch(double, params, body, query):
    project = params["project"]
    store = double._project(project)
    name = params["network"]
    if name not in store["networks"]:
        raise not_found("projects/%s/global/networks/%s" % (project, name))
    network = store["networks"][name]
    for key, value in body.items():
        if key in ("routingConfig", "mtu"):
            continue
        if key in ("name", "kind", "id", "selfLink", "selfLinkWithId", "creationTimestamp", "subnetworks") \
                or network.get(key) == value:
            continue
        raise bad_request("Invalid value for field 'resource.%s': '%s'. Only routingConfig and mtu can be "
                          "modified." % (key, value))
    if "mtu" in body and not 1300 <= body["mtu"] <= 8896:
        raise bad_request("Invalid value for field 'resource.mtu': '%s'. The MTU must be between 1300 and 8896."
                          % body["mtu"])

    def apply():
        if "mtu" in body:
            network["mtu"] = body["mtu"]
        if "routingConfig" in body:
            network.setdefault("routingConfig", {}).update(body["routingConfig"])

    return double._update_with_op(project, "global", network, "patch", apply)


def _networks_delete(double, params, body, query):
    project = params["project"]
    store = double._project(project)
    name = params["network"]
    link = double._compute_link(project, "global/networks/%s" % name)

    def check():
        users = sorted(s["selfLink"] for s in store["subnetworks"].values() if _last(s["network"]) == name)
        users += sorted(f["selfLink"] for f in store["firewalls"].values() if _last(f["network"]) == name)
        users += sorted("pending %s/%s" % k for k, v in store["_pending"].items()
                        if isinstance(v, dict) and _last(v.get("network")) == name)
        if users:
            raise ApiFailure(400, "FAILED_PRECONDITION", "The network resource '%s' is already being used by '%s'"
                             % ("projects/%s/global/networks/%s" % (project, name), users[0]),
                             "resourceInUseByAnotherResource")

    return double._delete_with_op(store, project, "networks", name, "global", link, check)


def _subnetworks_insert(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    name = body.get("name") or ""
    if not NAME_RE.match(name):
        raise bad_request("Invalid value for field 'resource.name': '%s'. Must be a match of regex "
                          "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
    if double.catalog.region_document(project, region) is None:
        raise bad_request("Invalid value for field 'region': '%s'. Unknown region." % region)
    if body.get("region") and _last(body["region"]) != region:
        raise bad_request("Invalid value for field 'resource.region': '%s'. It does not match the request "
                          "region '%s'." % (body["region"], region))
    network_name = double._network_key(project, body.get("network"))
    key = "%s/%s" % (region, name)
    if key in store["subnetworks"] or ("subnetworks", key) in store["_pending"]:
        raise already_exists("projects/%s/regions/%s/subnetworks/%s" % (project, region, name))
    roce_zone = _roce_zone(double._require_network(store, project, network_name))
    if roce_zone and double.catalog.region_of(roce_zone) != region:
        raise bad_request("Invalid value for field 'resource.region': '%s'. Subnetworks of network %s must be in "
                          "region %s, which contains the zone %s of its network profile." % (
                              region, network_name, double.catalog.region_of(roce_zone), roce_zone))
    if not body.get("ipCidrRange"):
        raise bad_request("Invalid value for field 'resource.ipCidrRange': ''. The IP range is required.")
    wanted = _cidr(body["ipCidrRange"], "resource.ipCidrRange")
    if wanted.prefixlen > 29 or wanted.prefixlen < 8:
        raise bad_request("Invalid value for field 'resource.ipCidrRange': '%s'. The prefix length must be "
                          "between /8 and /29." % body["ipCidrRange"])
    for secondary in body.get("secondaryIpRanges") or []:
        _cidr(secondary.get("ipCidrRange"), "resource.secondaryIpRanges.ipCidrRange")
    for other_name, other in double._subnet_ranges(store, network_name):
        if wanted.overlaps(ipaddress.ip_network(other)):
            raise bad_request("Invalid IPCidrRange: %s conflicts with existing subnetwork '%s' in region '%s'."
                              % (body["ipCidrRange"], other_name, region), "invalid")
    doc = copy.deepcopy(body)
    doc.update(kind="compute#subnetwork", id=_uint64_id(), region=double._compute_link(project, "regions/%s" % region),
               network=double._compute_link(project, "global/networks/%s" % network_name),
               gatewayAddress=str(next(wanted.hosts())), fingerprint=_fingerprint(),
               selfLink=double._compute_link(project, "regions/%s/subnetworks/%s" % (region, name)))
    doc.setdefault("privateIpGoogleAccess", False)
    doc.setdefault("stackType", "IPV4_ONLY")
    doc.setdefault("purpose", "PRIVATE")
    return double._insert_with_op(store, project, "subnetworks", key, "regions/%s" % region, doc)


def _subnetworks_get(double, params, body, query):
    store = double._project(params["project"])
    key = "%s/%s" % (params["region"], params["subnetwork"])
    if key not in store["subnetworks"]:
        raise not_found("projects/%s/regions/%s/subnetworks/%s" % (
            params["project"], params["region"], params["subnetwork"]))
    return copy.deepcopy(store["subnetworks"][key])


def _subnetworks_list(double, params, body, query):
    store = double._project(params["project"])
    items = [copy.deepcopy(s) for k, s in sorted(store["subnetworks"].items())
             if k.split("/")[0] == params["region"]]
    return dict(kind="compute#subnetworkList", items=items,
                selfLink=double._compute_link(params["project"], "regions/%s/subnetworks" % params["region"]))


SUBNET_PATCHABLE = ("secondaryIpRanges", "logConfig", "enableFlowLogs", "privateIpv6GoogleAccess", "stackType",
                    "ipv6AccessType", "role", "description", "purpose", "allowSubnetCidrRoutesOverlap", "params")


def _subnetworks_patch(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    key = "%s/%s" % (region, params["subnetwork"])
    if key not in store["subnetworks"]:
        raise not_found("projects/%s/regions/%s/subnetworks/%s" % (project, region, params["subnetwork"]))
    subnet = store["subnetworks"][key]
    if body.get("fingerprint") != subnet["fingerprint"]:
        raise ApiFailure(412, "FAILED_PRECONDITION", "Supplied fingerprint does not match current metadata "
                         "fingerprint.", "conditionNotMet")
    for field, value in body.items():
        if field == "fingerprint" or field in SUBNET_PATCHABLE:
            continue
        if subnet.get(field) != value:
            hint = " Use expandIpCidrRange to grow the range." if field == "ipCidrRange" else ""
            raise bad_request("Invalid value for field 'resource.%s': '%s'. This field cannot be changed by "
                              "patch.%s" % (field, value, hint))

    def apply():
        for field in SUBNET_PATCHABLE:
            if field in body:
                subnet[field] = copy.deepcopy(body[field])
        subnet["fingerprint"] = _fingerprint()

    return double._update_with_op(project, "regions/%s" % region, subnet, "patch", apply)


def _subnetworks_expand(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    key = "%s/%s" % (region, params["subnetwork"])
    if key not in store["subnetworks"]:
        raise not_found("projects/%s/regions/%s/subnetworks/%s" % (project, region, params["subnetwork"]))
    subnet = store["subnetworks"][key]
    wanted = _cidr(body.get("ipCidrRange"), "ipCidrRange")
    current = ipaddress.ip_network(subnet["ipCidrRange"])
    if not (wanted.prefixlen < current.prefixlen and current.subnet_of(wanted)):
        raise bad_request("Invalid IPCidrRange: %s. The new range must be larger than and contain the current "
                          "range %s." % (body.get("ipCidrRange"), subnet["ipCidrRange"]))
    for other_name, other in double._subnet_ranges(store, _last(subnet["network"]), skip_key=key):
        if wanted.overlaps(ipaddress.ip_network(other)):
            raise bad_request("Invalid IPCidrRange: %s conflicts with existing subnetwork '%s'."
                              % (body["ipCidrRange"], other_name))

    def apply():
        subnet["ipCidrRange"] = str(wanted)
        subnet["fingerprint"] = _fingerprint()

    return double._update_with_op(project, "regions/%s" % region, subnet, "expandIpCidrRange", apply)


def _subnetworks_delete(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    key = "%s/%s" % (region, params["subnetwork"])
    link = double._compute_link(project, "regions/%s/subnetworks/%s" % (region, params["subnetwork"]))
    return double._delete_with_op(store, project, "subnetworks", key, "regions/%s" % region, link)


def _check_firewall(body, name_required=True):
    if name_required:
        name = body.get("name") or ""
        if not NAME_RE.match(name):
            raise bad_request("Invalid value for field 'resource.name': '%s'. Must be a match of regex "
                              "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
    if bool(body.get("allowed")) == bool(body.get("denied")):
        raise bad_request("Invalid value for field 'resource': exactly one of 'allowed' or 'denied' must be set.")
    for field in ("allowed", "denied"):
        for index, rule in enumerate(body.get(field) or []):
            protocol = rule.get("IPProtocol")
            if not protocol or (protocol not in IP_PROTOCOLS and not str(protocol).isdigit()):
                raise bad_request("Invalid value for field 'resource.%s[%d].IPProtocol': '%s'." % (
                    field, index, protocol))
            for port in rule.get("ports") or []:
                if protocol not in ("tcp", "udp", "sctp"):
                    raise bad_request("Invalid value for field 'resource.%s[%d].ports': ports are only allowed "
                                      "for tcp, udp and sctp." % (field, index))
                match = re.match(r"^(\d+)(?:-(\d+))?$", port)
                if not match or int(match.group(1)) > 65535 or int(match.group(2) or 0) > 65535 \
                        or (match.group(2) and int(match.group(2)) < int(match.group(1))):
                    raise bad_request("Invalid value for field 'resource.%s[%d].ports': '%s'." % (
                        field, index, port))
    for field in ("sourceRanges", "destinationRanges"):
        for value in body.get(field) or []:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise bad_request("Invalid value for field 'resource.%s': '%s'. Must be a CIDR address range."
                                  % (field, value)) from None
    priority = body.get("priority", 1000)
    if not 0 <= priority <= 65535:
        raise bad_request("Invalid value for field 'resource.priority': '%s'." % priority)


def _firewalls_insert(double, params, body, query):
    project = params["project"]
    store = double._project(project)
    _check_firewall(body)
    name = body["name"]
    network_name = double._network_key(project, body.get("network") or "global/networks/default")
    if name in store["firewalls"] or ("firewalls", name) in store["_pending"]:
        raise already_exists("projects/%s/global/firewalls/%s" % (project, name))
    if _roce_zone(double._require_network(store, project, network_name)):
        raise bad_request("Invalid value for field 'resource.network': '%s'. Network %s uses a RoCE network profile, "
                          "which does not support VPC firewall rules (use a regional network firewall policy of "
                          "type RDMA_ROCE_POLICY)." % (body.get("network"), network_name))
    doc = copy.deepcopy(body)
    doc.update(kind="compute#firewall", id=_uint64_id(),
               network=double._compute_link(project, "global/networks/%s" % network_name),
               selfLink=double._compute_link(project, "global/firewalls/%s" % name))
    doc.setdefault("direction", "INGRESS")
    doc.setdefault("priority", 1000)
    doc.setdefault("description", "")
    doc.setdefault("disabled", False)
    doc.setdefault("logConfig", {"enable": False})
    if doc["direction"] == "INGRESS" and not (doc.get("sourceRanges") or doc.get("sourceTags")
                                              or doc.get("sourceServiceAccounts")):
        doc["sourceRanges"] = ["0.0.0.0/0"]
    if doc["direction"] == "EGRESS" and not doc.get("destinationRanges"):
        doc["destinationRanges"] = ["0.0.0.0/0"]
    return double._insert_with_op(store, project, "firewalls", name, "global", dict(doc, network=doc["network"]))


def _firewalls_get(double, params, body, query):
    store = double._project(params["project"])
    if params["firewall"] not in store["firewalls"]:
        raise not_found("projects/%s/global/firewalls/%s" % (params["project"], params["firewall"]))
    return copy.deepcopy(store["firewalls"][params["firewall"]])


def _firewalls_list(double, params, body, query):
    store = double._project(params["project"])
    return dict(kind="compute#firewallList", items=[copy.deepcopy(f) for k, f in sorted(store["firewalls"].items())],
                selfLink=double._compute_link(params["project"], "global/firewalls"))


def _firewalls_change(double, params, body, replace):
    project = params["project"]
    store = double._project(project)
    name = params["firewall"]
    if name not in store["firewalls"]:
        raise not_found("projects/%s/global/firewalls/%s" % (project, name))
    firewall = store["firewalls"][name]
    if body.get("name") not in (None, name):
        raise bad_request("Invalid value for field 'resource.name': '%s'. The name cannot be changed." % body["name"])
    if "network" in body and _last(body["network"]) != _last(firewall["network"]):
        raise bad_request("Invalid value for field 'resource.network': '%s'. The network of a firewall rule "
                          "cannot be changed." % body["network"])
    merged = copy.deepcopy(firewall)
    if replace:
        keep = {k: firewall[k] for k in ("kind", "id", "creationTimestamp", "selfLink", "network", "name")}
        merged = dict(keep, **copy.deepcopy(body))
        merged.setdefault("direction", "INGRESS")
        merged.setdefault("priority", 1000)
    else:
        merged.update(copy.deepcopy(body))
        # a list set in the patch replaces the whole list; allowed and denied exclude each other
        if "allowed" in body and body["allowed"]:
            merged.pop("denied", None)
        if "denied" in body and body["denied"]:
            merged.pop("allowed", None)
    _check_firewall(merged)

    def apply():
        firewall.clear()
        firewall.update(merged)

    return double._update_with_op(project, "global", firewall, "update" if replace else "patch", apply)


def _firewalls_patch(double, params, body, query):
    return _firewalls_change(double, params, body, replace=False)


def _firewalls_update(double, params, body, query):
    return _firewalls_change(double, params, body, replace=True)


def _firewalls_delete(double, params, body, query):
    project = params["project"]
    store = double._project(project)
    link = double._compute_link(project, "global/firewalls/%s" % params["firewall"])
    return double._delete_with_op(store, project, "firewalls", params["firewall"], "global", link)


def _resource_policies_insert(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    name = body.get("name") or ""
    if not NAME_RE.match(name):
        raise bad_request("Invalid value for field 'resource.name': '%s'." % name)
    kinds = [k for k in ("groupPlacementPolicy", "snapshotSchedulePolicy", "instanceSchedulePolicy",
                         "diskConsistencyGroupPolicy", "workloadPolicy") if body.get(k)]
    if len(kinds) != 1:
        raise bad_request("Invalid value for field 'resource': exactly one policy type must be set.")
    key = "%s/%s" % (region, name)
    if key in store["resourcePolicies"] or ("resourcePolicies", key) in store["_pending"]:
        raise already_exists("projects/%s/regions/%s/resourcePolicies/%s" % (project, region, name))
    doc = copy.deepcopy(body)
    doc.update(kind="compute#resourcePolicy", id=_uint64_id(), status="READY",
               region=double._compute_link(project, "regions/%s" % region),
               selfLink=double._compute_link(project, "regions/%s/resourcePolicies/%s" % (region, name)))
    return double._insert_with_op(store, project, "resourcePolicies", key, "regions/%s" % region, doc)


def _resource_policies_get(double, params, body, query):
    store = double._project(params["project"])
    key = "%s/%s" % (params["region"], params["resourcePolicy"])
    if key not in store["resourcePolicies"]:
        raise not_found("projects/%s/regions/%s/resourcePolicies/%s" % (
            params["project"], params["region"], params["resourcePolicy"]))
    return copy.deepcopy(store["resourcePolicies"][key])


def _resource_policies_delete(double, params, body, query):
    project, region = params["project"], params["region"]
    store = double._project(project)
    key = "%s/%s" % (region, params["resourcePolicy"])
    link = double._compute_link(project, "regions/%s/resourcePolicies/%s" % (region, params["resourcePolicy"]))
    return double._delete_with_op(store, project, "resourcePolicies", key, "regions/%s" % region, link)


def _regions_get(double, params, body, query):
    doc = double.catalog.region_document(params["project"], params["region"])
    if doc is None:
        raise not_found("projects/%s/regions/%s" % (params["project"], params["region"]))
    return doc


def _zones_get(double, params, body, query):
    doc = double.catalog.zone_document(params["project"], params["zone"])
    if doc is None:
        raise not_found("projects/%s/zones/%s" % (params["project"], params["zone"]))
    return doc


def _zonal_offer(kind, param):
    def get(double, params, body, query):
        doc = double.catalog.offer_document(params["project"], params["zone"], kind, params[param])
        if doc is None:
            raise not_found("projects/%s/zones/%s/%s/%s" % (params["project"], params["zone"], kind, params[param]))
        return doc

    return get


def _compute_operation(double, project, scope, name, wait):
    key = ("compute", project, scope, name)
    deadline = time.monotonic() + double.wait_max
    while True:
        double._advance()
        op = double.operations.get(key)
        if op is None:
            raise not_found("projects/%s/%s/operations/%s" % (project, scope, name))
        if op.done or not wait:
            return copy.deepcopy(op.document)
        left = min(deadline, op.done_at) - time.monotonic()
        if left <= 0 and time.monotonic() >= deadline:
            return copy.deepcopy(op.document)
        double.changed.wait(max(0.001, left))


def _global_operations_get(double, params, body, query):
    return _compute_operation(double, params["project"], "global", params["operation"], wait=False)


def _global_operations_wait(double, params, body, query):
    return _compute_operation(double, params["project"], "global", params["operation"], wait=True)


def _region_operations_get(double, params, body, query):
    return _compute_operation(double, params["project"], "regions/%s" % params["region"], params["operation"],
                              wait=False)


def _region_operations_wait(double, params, body, query):
    return _compute_operation(double, params["project"], "regions/%s" % params["region"], params["operation"],
                              wait=True)


# ---------------------------------------------------------------------- container handlers

def _container_link(project, location, rest=""):
    return "%sv1/projects/%s/locations/%s%s" % (CONTAINER_SELF_LINK_HOST, project, location, rest)


def _clusters_create(double, params, body, query):
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    cluster = copy.deepcopy(body.get("cluster") or {})
    if body.get("parent") and body["parent"] != "projects/%s/locations/%s" % (project, location):
        raise bad_request("parent %r does not match the URL" % body["parent"])
    name = cluster.get("name") or ""
    if not re.match(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", name):
        raise bad_request("Invalid value for cluster.name: %r. Must start with a letter, be at most 40 characters "
                          "of lowercase letters, digits and dashes, and end with a letter or digit." % name)
    _require_location(double, project, location)
    key = "%s/%s" % (location, name)
    if key in store["clusters"]:
        raise ApiFailure(409, "ALREADY_EXISTS", "Already exists: projects/%s/locations/%s/clusters/%s." % (
            project, location, name), "alreadyExists")
    pools = cluster.get("nodePools") or []
    if pools and (cluster.get("nodeConfig") or cluster.get("initialNodeCount")):
        raise bad_request("Cluster.node_config and Cluster.initial_node_count may not be set when "
                          "Cluster.node_pools is set.")
    autopilot = (cluster.get("autopilot") or {}).get("enabled")
    if not pools and not cluster.get("initialNodeCount") and not autopilot:
        raise bad_request("Cluster.initial_node_count must be greater than zero.")
    for pool in pools:
        _require_offers(double, location, dict(pool, locations=pool.get("locations") or cluster.get("locations")))
    network_config = cluster.get("networkConfig") or {}
    if network_config.get("enableMultiNetworking"):
        if network_config.get("datapathProvider") != "ADVANCED_DATAPATH":
            raise bad_request("Multi-networking requires GKE Dataplane V2 "
                              "(networkConfig.datapathProvider=ADVANCED_DATAPATH).")
        if not (cluster.get("ipAllocationPolicy") or {}).get("useIpAliases"):
            raise bad_request("Multi-networking requires VPC-native clusters (ipAllocationPolicy.useIpAliases).")
    version = cluster.get("initialClusterVersion") or double.gke_versions[0]
    if version not in double.gke_versions and version not in ("latest", "-"):
        raise bad_request("Master version %r is unsupported." % version)
    if version in ("latest", "-"):
        version = double.gke_versions[0]
    network = cluster.get("network") or "default"
    cluster.update(location=location, zone=location, status="PROVISIONING", currentMasterVersion=version,
                   currentNodeVersion=version, createTime=_now_text(compute=False), endpoint="10.0.0.2",
                   selfLink=_container_link(project, location, "/clusters/%s" % name), id="%032x" %
                   random.getrandbits(128), network=network, subnetwork=cluster.get("subnetwork") or network)
    if not pools:
        pools = [dict(name="default-pool", initialNodeCount=cluster.get("initialNodeCount"),
                      config=cluster.get("nodeConfig") or {})]
    stored_pools = []
    for pool in pools:
        stored = _new_pool(project, location, name, pool, version)
        store["nodePools"]["%s/%s" % (key, pool["name"])] = stored
        stored_pools.append(stored)
    cluster["nodePools"] = [copy.deepcopy(p) for p in stored_pools]
    net_cfg = cluster.setdefault("networkConfig", {})
    net_cfg.setdefault("network", "projects/%s/global/networks/%s" % (project, _last(network)))
    net_cfg.setdefault("subnetwork", "projects/%s/regions/%s/subnetworks/%s" % (
        project, _region(location), _last(cluster["subnetwork"])))
    store["clusters"][key] = cluster

    def effect(ok):
        if key not in store["clusters"]:
            return
        cluster["status"] = "RUNNING" if ok else "ERROR"
        for pool in stored_pools:
            pool["status"] = "RUNNING" if ok else "ERROR"
        cluster["nodePools"] = [copy.deepcopy(p) for k, p in sorted(store["nodePools"].items())
                                if k.startswith(key + "/")]

    return double._container_op(project, location, "CREATE_CLUSTER", cluster["selfLink"], effect, key)


def _region(location):
    return location if location.count("-") == 1 else location.rsplit("-", 1)[0]


def _new_pool(project, location, cluster_name, pool, version):
    stored = copy.deepcopy(pool)
    config = stored.setdefault("config", {})
    config.setdefault("machineType", "e2-medium")
    config.setdefault("diskSizeGb", 100)
    config.setdefault("imageType", "COS_CONTAINERD")
    stored.setdefault("management", {"autoUpgrade": True, "autoRepair": True})
    stored.setdefault("version", version)
    stored.setdefault("initialNodeCount", 1 if not stored.get("autoscaling") else 0)
    stored.update(status="PROVISIONING", selfLink=_container_link(project, location, "/clusters/%s/nodePools/%s" % (
        cluster_name, pool["name"])))
    return stored


def _clusters_get(double, params, body, query):
    store = double._project(params["projectsId"])
    dummy, cluster = double._cluster(store, params["projectsId"], params["locationsId"], params["clustersId"])
    return copy.deepcopy(cluster)


def _clusters_list(double, params, body, query):
    store = double._project(params["projectsId"])
    location = params["locationsId"]
    return dict(clusters=[copy.deepcopy(c) for k, c in sorted(store["clusters"].items())
                          if location == "-" or k.split("/")[0] == location])


# ClusterUpdate.desired* fields that do not land on a top-level field of the same name
_CLUSTER_UPDATE_PATHS = {
    "desiredDatapathProvider": ("networkConfig", "datapathProvider"),
    "desiredEnableMultiNetworking": ("networkConfig", "enableMultiNetworking"),
    "desiredDefaultSnatStatus": ("networkConfig", "defaultSnatStatus"),
    "desiredIntraNodeVisibilityConfig": ("networkConfig", "enableIntraNodeVisibility"),
    "desiredMasterVersion": ("currentMasterVersion",),
    "desiredNodeVersion": ("currentNodeVersion",),
    "desiredStackType": ("ipAllocationPolicy", "stackType"),
}


def _clusters_update(double, params, body, query):
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, params["clustersId"])
    double._cluster_busy(project, key)
    update = body.get("update") or {}
    if not update:
        raise bad_request("update must set at least one desired field.")

    def effect(ok):
        if not ok:
            cluster["status"] = "RUNNING"
            return
        for field, value in update.items():
            target = _CLUSTER_UPDATE_PATHS.get(field)
            if target is None:
                target = (field[len("desired"):][0].lower() + field[len("desired") + 1:],) \
                    if field.startswith("desired") else (field,)
            holder = cluster
            for part in target[:-1]:
                holder = holder.setdefault(part, {})
            if field == "desiredIntraNodeVisibilityConfig":
                value = value.get("enabled")
            holder[target[-1]] = copy.deepcopy(value)
        cluster["status"] = "RUNNING"

    cluster["status"] = "RECONCILING"
    return double._container_op(project, location, "UPDATE_CLUSTER", cluster["selfLink"], effect, key)


def _clusters_delete(double, params, body, query):
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, params["clustersId"])
    double._cluster_busy(project, key)
    cluster["status"] = "STOPPING"

    def effect(ok):
        if ok:
            store["clusters"].pop(key, None)
            for pool_key in [k for k in store["nodePools"] if k.startswith(key + "/")]:
                store["nodePools"].pop(pool_key)
        else:
            cluster["status"] = "ERROR"

    return double._container_op(project, location, "DELETE_CLUSTER", cluster["selfLink"], effect, key)


def _check_pool_networks(double, project, location, cluster, pool):
    extra = ((pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs")) or []
    if not extra:
        return
    if not (cluster.get("networkConfig") or {}).get("enableMultiNetworking"):
        raise bad_request("Additional node networks require a cluster with multi-networking enabled "
                          "(networkConfig.enableMultiNetworking).")
    store = double._project(project)
    seen, seen_subnets = set(), set()
    machine = (pool.get("config") or {}).get("machineType")
    zones = pool.get("locations") or cluster.get("locations") or double.catalog.default_zones(location)
    for index, item in enumerate(extra):
        network, subnetwork = _last(item.get("network")), _last(item.get("subnetwork"))
        where = "nodePool.networkConfig.additionalNodeNetworkConfigs[%d]" % index
        if not network or not subnetwork:
            raise bad_request("%s: network and subnetwork are required." % where)
        if network == _last((cluster.get("networkConfig") or {}).get("network") or cluster.get("network")):
            raise bad_request("%s: network %s is the cluster's primary network." % (where, network))
        if network not in store["networks"]:
            raise bad_request("%s: network %s not found." % (where, network))
        roce_zone = _roce_zone(store["networks"][network])
        # a RoCE profile allows several NICs in the same network (allowMultiNicInSameNetwork), each its own subnet
        if network in seen and not roce_zone:
            raise bad_request("%s: network %s is used twice." % (where, network))
        if subnetwork in seen_subnets:
            raise bad_request("%s: subnetwork %s is used twice." % (where, subnetwork))
        seen.add(network)
        seen_subnets.add(subnetwork)
        if roce_zone and machine not in gcp_catalog.MRDMA_MACHINES:
            raise bad_request("%s: network %s uses a RoCE network profile and accepts only MRDMA network "
                              "interfaces; machine type %s has none." % (where, network, machine))
        if roce_zone and any(z != roce_zone for z in zones):
            raise bad_request("%s: network %s is restricted to zone %s by its network profile; the node pool runs "
                              "in %s." % (where, network, roce_zone, ", ".join(zones)))
        subnet = store["subnetworks"].get("%s/%s" % (_region(location), subnetwork))
        if subnet is None:
            raise bad_request("%s: subnetwork %s not found in region %s." % (where, subnetwork, _region(location)))
        if _last(subnet["network"]) != network:
            raise bad_request("%s: subnetwork %s is not in network %s." % (where, subnetwork, network))


def _node_pools_create(double, params, body, query):
    project, location, cluster_name = params["projectsId"], params["locationsId"], params["clustersId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, cluster_name)
    pool = body.get("nodePool") or {}
    name = pool.get("name") or ""
    if not re.match(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", name):
        raise bad_request("Invalid value for nodePool.name: %r." % name)
    pool_key = "%s/%s" % (key, name)
    if pool_key in store["nodePools"]:
        raise ApiFailure(409, "ALREADY_EXISTS", "Already exists: projects/%s/locations/%s/clusters/%s/nodePools/%s."
                         % (project, location, cluster_name, name), "alreadyExists")
    double._cluster_busy(project, key)
    if cluster.get("status") != "RUNNING":
        raise ApiFailure(400, "FAILED_PRECONDITION", "Cluster %s is not RUNNING (status %s)." % (
            cluster_name, cluster.get("status")), "failedPrecondition")
    _check_pool_networks(double, project, location, cluster, pool)
    _require_offers(double, location, dict(pool, locations=pool.get("locations") or cluster.get("locations")))
    stored = _new_pool(project, location, cluster_name, pool, cluster.get("currentNodeVersion"))
    store["nodePools"][pool_key] = stored
    cluster["status"] = "RECONCILING"

    def effect(ok):
        cluster["status"] = "RUNNING"
        if ok:
            stored["status"] = "RUNNING"
        else:
            stored["status"] = "ERROR"
        cluster["nodePools"] = [copy.deepcopy(p) for k, p in sorted(store["nodePools"].items())
                                if k.startswith(key + "/")]

    return double._container_op(project, location, "CREATE_NODE_POOL", stored["selfLink"], effect, key)


def _node_pool(double, params):
    project, location, cluster_name = params["projectsId"], params["locationsId"], params["clustersId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, cluster_name)
    pool_key = "%s/%s" % (key, params["nodePoolsId"])
    if pool_key not in store["nodePools"]:
        raise ApiFailure(404, "NOT_FOUND", "Not found: projects/%s/locations/%s/clusters/%s/nodePools/%s." % (
            project, location, cluster_name, params["nodePoolsId"]), "notFound")
    return store, key, cluster, pool_key, store["nodePools"][pool_key]


def _node_pools_get(double, params, body, query):
    return copy.deepcopy(_node_pool(double, params)[4])


def _node_pools_list(double, params, body, query):
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    key, dummy = double._cluster(store, project, location, params["clustersId"])
    return dict(nodePools=[copy.deepcopy(p) for k, p in sorted(store["nodePools"].items())
                           if k.startswith(key + "/")])


# UpdateNodePoolRequest fields that are not NodeConfig fields of the same name
_POOL_UPDATE_PATHS = {"nodeVersion": ("version",), "locations": ("locations",), "upgradeSettings": ("upgradeSettings",),
                      "queuedProvisioning": ("queuedProvisioning",), "nodeNetworkConfig": ("networkConfig",)}
_POOL_UPDATE_IGNORED = ("name", "projectId", "zone", "clusterId", "nodePoolId", "etag")


def _pool_op(double, params, operation_type, apply):
    store, key, cluster, pool_key, pool = _node_pool(double, params)
    double._cluster_busy(params["projectsId"], key)
    pool["status"] = "RECONCILING"

    def effect(ok):
        if ok:
            apply(pool)
        pool["status"] = "RUNNING"
        cluster["nodePools"] = [copy.deepcopy(p) for k, p in sorted(store["nodePools"].items())
                                if k.startswith(key + "/")]

    return double._container_op(params["projectsId"], params["locationsId"], operation_type, pool["selfLink"],
                                effect, key)


def _node_pools_update(double, params, body, query):
    """UpdateNodePoolRequest: ``labels`` (NodeLabels) and ``taints`` (NodeTaints) are wrappers whose
    map/list *replaces* the pool's (the API docs: "the existing node labels will be replaced");
    ``diskSizeGb`` is an int64 string in the request and an int32 number in NodeConfig."""
    body = copy.deepcopy(body)

    def apply(pool):
        config = pool.setdefault("config", {})
        for field, value in body.items():
            if field in _POOL_UPDATE_IGNORED:
                continue
            if field == "labels":
                config["labels"] = dict((value or {}).get("labels") or {})
            elif field == "taints":
                config["taints"] = list((value or {}).get("taints") or [])
            elif field == "diskSizeGb":
                config["diskSizeGb"] = int(value)
            else:
                target = _POOL_UPDATE_PATHS.get(field, ("config", field))
                holder = pool
                for part in target[:-1]:
                    holder = holder.setdefault(part, {})
                if isinstance(value, dict) and isinstance(holder.get(target[-1]), dict):
                    holder[target[-1]].update(copy.deepcopy(value))
                else:
                    holder[target[-1]] = copy.deepcopy(value)

    return _pool_op(double, params, "UPGRADE_NODES" if "nodeVersion" in body else "UPDATE_NODE_POOL", apply)


def _clusters_set_maintenance_policy(double, params, body, query):
    """Replaces the cluster's maintenancePolicy; a stale ``resourceVersion`` is refused (400
    FAILED_PRECONDITION, as the API does for a concurrent change) and a new one is issued."""
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, params["clustersId"])
    double._cluster_busy(project, key)
    policy = copy.deepcopy(body.get("maintenancePolicy") or {})
    stored_version = (cluster.get("maintenancePolicy") or {}).get("resourceVersion")
    if policy.get("resourceVersion") and policy["resourceVersion"] != stored_version:
        raise ApiFailure(400, "FAILED_PRECONDITION", "The maintenance policy was changed concurrently "
                              "(resourceVersion %s is not the current one)." % policy["resourceVersion"],
                              "failedPrecondition")
    exclusions = ((policy.get("window") or {}).get("maintenanceExclusions")) or {}
    for name, window in exclusions.items():
        if not window.get("startTime"):
            raise bad_request("maintenancePolicy.window.maintenanceExclusions[%s].startTime is required." % name)
    cluster["status"] = "RECONCILING"

    def effect(ok):
        cluster["status"] = "RUNNING"
        if ok:
            policy["resourceVersion"] = "%08x" % random.getrandbits(32)
            cluster["maintenancePolicy"] = policy

    return double._container_op(project, location, "UPDATE_CLUSTER", cluster["selfLink"], effect, key)


def _node_pools_set_size(double, params, body, query):
    count = body.get("nodeCount")
    if count is None or count < 0:
        raise bad_request("nodeCount must be 0 or more.")

    def apply(pool):
        pool["initialNodeCount"] = count
        pool["currentNodeCount"] = count

    return _pool_op(double, params, "SET_NODE_POOL_SIZE", apply)


def _node_pools_set_management(double, params, body, query):
    def apply(pool):
        pool["management"] = copy.deepcopy(body.get("management") or {})

    return _pool_op(double, params, "SET_NODE_POOL_MANAGEMENT", apply)


def _node_pools_set_autoscaling(double, params, body, query):
    def apply(pool):
        pool["autoscaling"] = copy.deepcopy(body.get("autoscaling") or {})

    return _pool_op(double, params, "SET_NODE_POOL_MANAGEMENT", apply)


def _node_pools_delete(double, params, body, query):
    store, key, cluster, pool_key, pool = _node_pool(double, params)
    double._cluster_busy(params["projectsId"], key)
    pool["status"] = "STOPPING"

    def effect(ok):
        if ok:
            store["nodePools"].pop(pool_key, None)
        else:
            pool["status"] = "ERROR"
        cluster["nodePools"] = [copy.deepcopy(p) for k, p in sorted(store["nodePools"].items())
                                if k.startswith(key + "/")]

    return double._container_op(params["projectsId"], params["locationsId"], "DELETE_NODE_POOL", pool["selfLink"],
                                effect, key)


def _container_operations_get(double, params, body, query):
    key = ("container", params["projectsId"], params["locationsId"], params["operationsId"])
    op = double.operations.get(key)
    if op is None:
        raise ApiFailure(404, "NOT_FOUND", "Not found: projects/%s/locations/%s/operations/%s." % (
            params["projectsId"], params["locationsId"], params["operationsId"]), "notFound")
    return copy.deepcopy(op.document)


def _container_operations_list(double, params, body, query):
    return dict(operations=[copy.deepcopy(op.document) for (api, project, scope, name), op in
                            sorted(double.operations.items())
                            if api == "container" and project == params["projectsId"]
                            and params["locationsId"] in ("-", scope)])


def _require_location(double, project, location):
    if double.catalog.region_of(location) is None:
        raise ApiFailure(404, "NOT_FOUND", "Location \"%s\" not found in project %s." % (location, project),
                         "notFound")


def _require_offers(double, location, pool):
    problems = double.catalog.pool_problems(location, pool)
    if problems:
        raise bad_request(" ".join(problems))


def _server_config(double, params, body, query):
    _require_location(double, params["projectsId"], params["locationsId"])
    return dict(defaultClusterVersion=double.gke_versions[0], validMasterVersions=list(double.gke_versions),
                validNodeVersions=list(double.gke_versions), defaultImageType="COS_CONTAINERD",
                validImageTypes=list(double.catalog.image_types),
                channels=[dict(channel=c, defaultVersion=double.gke_versions[0],
                               validVersions=list(double.gke_versions)) for c in ("RAPID", "REGULAR", "STABLE")])


_HANDLERS = {
    "compute.networks.insert": _networks_insert,
    "compute.networks.get": _networks_get,
    "compute.networks.list": _networks_list,
    "compute.networks.patch": _networks_patch,
    "compute.networks.delete": _networks_delete,
    "compute.subnetworks.insert": _subnetworks_insert,
    "compute.subnetworks.get": _subnetworks_get,
    "compute.subnetworks.list": _subnetworks_list,
    "compute.subnetworks.patch": _subnetworks_patch,
    "compute.subnetworks.expandIpCidrRange": _subnetworks_expand,
    "compute.subnetworks.delete": _subnetworks_delete,
    "compute.firewalls.insert": _firewalls_insert,
    "compute.firewalls.get": _firewalls_get,
    "compute.firewalls.list": _firewalls_list,
    "compute.firewalls.patch": _firewalls_patch,
    "compute.firewalls.update": _firewalls_update,
    "compute.firewalls.delete": _firewalls_delete,
    "compute.resourcePolicies.insert": _resource_policies_insert,
    "compute.resourcePolicies.get": _resource_policies_get,
    "compute.resourcePolicies.delete": _resource_policies_delete,
    "compute.regions.get": _regions_get,
    "compute.networkProfiles.get": _network_profiles_get,
    "compute.networkProfiles.list": _network_profiles_list,
    "compute.zones.get": _zones_get,
    "compute.machineTypes.get": _zonal_offer("machineTypes", "machineType"),
    "compute.acceleratorTypes.get": _zonal_offer("acceleratorTypes", "acceleratorType"),
    "compute.diskTypes.get": _zonal_offer("diskTypes", "diskType"),
    "compute.globalOperations.get": _global_operations_get,
    "compute.globalOperations.wait": _global_operations_wait,
    "compute.regionOperations.get": _region_operations_get,
    "compute.regionOperations.wait": _region_operations_wait,
    "projects.locations.clusters.create": _clusters_create,
    "projects.locations.clusters.get": _clusters_get,
    "projects.locations.clusters.list": _clusters_list,
    "projects.locations.clusters.update": _clusters_update,
    "projects.locations.clusters.delete": _clusters_delete,
    "projects.locations.clusters.setMaintenancePolicy": _clusters_set_maintenance_policy,
    "projects.locations.clusters.nodePools.create": _node_pools_create,
    "projects.locations.clusters.nodePools.get": _node_pools_get,
    "projects.locations.clusters.nodePools.list": _node_pools_list,
    "projects.locations.clusters.nodePools.update": _node_pools_update,
    "projects.locations.clusters.nodePools.setSize": _node_pools_set_size,
    "projects.locations.clusters.nodePools.setManagement": _node_pools_set_management,
    "projects.locations.clusters.nodePools.setAutoscaling": _node_pools_set_autoscaling,
    "projects.locations.clusters.nodePools.delete": _node_pools_delete,
    "projects.locations.operations.get": _container_operations_get,
    "projects.locations.operations.list": _container_operations_list,
    "projects.locations.getServerConfig": _server_config,
}


class _Server(ThreadingHTTPServer):
    # the default backlog of 5 drops concurrent connects (the client then waits 1 s for a SYN retry)
    request_queue_size = 128


def _handler_class(double):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "GcpDouble/1.0"
        # headers and body go out in two writes: without TCP_NODELAY every answer waits ~40 ms for a delayed ACK
        disable_nagle_algorithm = True

        def log_message(self, format, *args):  # pylint: disable=redefined-builtin
            del format, args

        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, document, action = double.handle(self.command, self.path, self.headers, body)
            if action == "reset":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            payload = b"" if document is None else json.dumps(document).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run the GCP API double until SIGTERM/SIGINT.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--wait-max", type=float, default=120.0)
    parser.add_argument("--port-file")
    args = parser.parse_args(argv)
    double = GcpDouble(latency=args.latency, token=args.token, wait_max=args.wait_max).start(args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    if args.port_file:
        with open(args.port_file, "w") as handle:
            handle.write(str(double.port))
    sys.stdout.write("READY %s\n" % double.url)
    sys.stdout.flush()
    stop.wait()
    double.stop()


if __name__ == "__main__":
    main()
