# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict, stateful Azure Resource Manager double for AKS managed clusters and agent pools.

It is a real HTTP server on 127.0.0.1 (random port), so it serves the same bytes to the code under
test whether that runs in-process (pytest) or in an ``ansible-playbook`` subprocess (pass
``double.url`` as the module's ``arm_endpoint``)::

    from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble

    with ArmDouble() as arm:
        arm.add_cluster("gpu-rg", "gpu-aks", kubernetes_version="1.33.2")
        token = arm.issue_token()                       # or the managed-identity endpoint below
        ...                                             # talk to arm.url
        arm.fault("throttle", count=2, method="PUT")    # 2 x 429 with Retry-After
        arm.requests_for("PUT", "agentPools")           # the request log

What it serves (every ARM path also needs ``?api-version=`` = ``API_VERSION`` of
tests/contract/arm_models.py, the version azure-mgmt-containerservice's models describe):

- ``GET  /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{c}``
- ``GET  .../managedClusters/{c}/agentPools`` (list) and ``GET|PUT|DELETE .../agentPools/{p}``
- ``GET  /subscriptions/{s}/providers/Microsoft.ContainerService/locations/{l}/operations/{id}``
  (Azure-AsyncOperation status) and ``.../operationresults/{id}`` (Location polling)
- ``GET  /msi/token`` - an App Service managed-identity endpoint: set ``IDENTITY_ENDPOINT`` to
  ``double.msi_endpoint`` and ``IDENTITY_HEADER`` to ``double.msi_header`` and azure-identity's
  DefaultAzureCredential gets its tokens here (audience-checked, expiring).
- control: ``POST /_double/faults`` (body: the arguments of ``fault()``), ``GET /_double/requests``,
  ``POST /_double/clusters`` (body: the arguments of ``add_cluster()``), ``GET /_double/state``.

How it is strict (what the real service rejects):

- ``Authorization: Bearer`` required (401 AuthenticationFailed / InvalidAuthenticationToken /
  ExpiredAuthenticationToken / InvalidAuthenticationTokenAudience).
- ``api-version`` required and checked (400 MissingApiVersionParameter / NoRegisteredProviderFound).
- Names are case-insensitive, as in ARM; unknown subscription, resource group or cluster -> 404
  (SubscriptionNotFound / ResourceGroupNotFound / ResourceNotFound); missing pool -> 404 NotFound.
- PUT bodies are validated with tests/contract/arm_models.py against the SDK models: unknown
  properties, wrong JSON types and enum values -> 400 InvalidRequestContent (read-only properties
  are ignored, as ARM does).
- AKS rules: immutable properties (vmSize, osType, osSKU, gpuInstanceProfile, gpuProfile) changed on
  an existing pool -> 400 PropertyChangeNotAllowed; a GPU instance profile together with the
  cluster autoscaler, on Azure Linux, on Windows or on a VM size that is not MIG-capable -> 400;
  autoscaler bounds; taint syntax; agent pool names; orchestratorVersion newer than the cluster or
  a downgrade -> 400; a write while another operation on the pool runs -> 409 OperationNotAllowed;
  deleting the last System pool -> 400.
- PUT replaces the pool: a mutable property left out of the body goes back to its default (so a
  client that sends a sparse PUT loses labels and taints, as it would on AKS). Immutable
  properties left out keep their value.

Long-running operations: PUT answers 201 (create) / 200 (update) with provisioningState
Creating / Updating; DELETE answers 202 and the pool shows Deleting. How the client learns the
outcome is ``lro_style``: ``"async"`` (Azure-AsyncOperation on PUT, Location on DELETE: the
default), ``"location"`` (Location on both) or ``"state"`` (no header: poll the resource). Every
read of the operation, its result URL or the resource itself counts as a poll; the operation stays
InProgress for ``lro_polls`` polls and at least ``lro_seconds`` seconds, then ends Succeeded (or
Failed when an ``lro_failed`` fault says so; the pool is left in provisioningState Failed, as AKS
leaves it). Every LRO answer carries ``Retry-After: <retry_after>``.

Faults (``fault(kind, count=1, method=None, match=None, ...)``, matched on method and a
case-insensitive path substring, each used ``count`` times):

- ``throttle``: 429 TooManyRequests with ``Retry-After``; ``unavailable``: 503 ServiceUnavailable;
- ``reset``: the connection is reset before the request is handled;
- ``commit_then_reset``: the request is carried out, then the connection is reset instead of the
  answer (a client that was killed or cut off after its write reached ARM);
- ``lro_failed``: the next long-running operation the request starts ends Failed with ``code`` /
  ``message`` (default OverconstrainedAllocationRequest, the allocation failure GPU pools meet);
- ``echo_auth``: an error (status ``code``, default 401) whose message quotes the request's
  Authorization header back in every form (tests/doubles/hostile.py), as a careless proxy might.

The MIG-capable VM sizes below are the double's own list (A100 / H100 / H200 sizes the AKS MIG
article and the VM-size pages name), kept apart from the collection's MIG catalog on purpose.
"""

from __future__ import annotations

import copy
import json
import re
import socket
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import API_VERSION, validate
from ansible_collections.gpu_ops.cluster.tests.doubles.hostile import echo

DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-00000000a2c5"
DEFAULT_AUDIENCES = ("https://management.azure.com", "https://management.core.windows.net")
PROVIDER = "Microsoft.ContainerService"
POOL_TYPE = "Microsoft.ContainerService/managedClusters/agentPools"
CLUSTER_TYPE = "Microsoft.ContainerService/managedClusters"
FAULT_KINDS = ("throttle", "unavailable", "reset", "commit_then_reset", "lro_failed", "echo_auth")
LRO_STYLES = ("async", "location", "state")

MIG_VM_SIZES = frozenset(s.lower() for s in (
    "Standard_ND96asr_v4",  # 8 x A100 40GB
    "Standard_ND96amsr_A100_v4",  # 8 x A100 80GB
    "Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4", "Standard_NC96ads_A100_v4",  # A100 80GB PCIe
    "Standard_ND96isr_H100_v5",  # 8 x H100 80GB
    "Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5",  # H100 NVL 94GB
    "Standard_ND96isr_H200_v5",  # 8 x H200 141GB
))
AZURE_LINUX_SKUS = frozenset(("azurelinux", "azurelinux3", "cblmariner", "azurecontainerlinux"))
WINDOWS_PREFIX = "windows"
IMMUTABLE = ("vmSize", "osType", "osSKU", "gpuInstanceProfile", "gpuProfile")
TAINT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?(=[-A-Za-z0-9_.]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$")
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")

_ARM_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)"
    r"(?:/resourceGroups/(?P<rg>[^/]+)"
    r"(?:/providers/Microsoft\.ContainerService/managedClusters/(?P<cluster>[^/]+)"
    r"(?:/(?P<pools>agentPools)(?:/(?P<pool>[^/]+))?)?)?)?"
    r"(?:/providers/Microsoft\.ContainerService/locations/(?P<loc>[^/]+)/(?P<opkind>operations|operationresults)/(?P<op>[^/]+))?"
    r"/?$",
    re.IGNORECASE,
)


class DoubleCredential:
    """A TokenCredential standing in for Microsoft Entra ID (which cannot run here): the double issues the tokens.

    ``scopes`` records what was asked for; ``lifetime`` sets how long each token lives; ``audience``
    overrides the audience derived from the scope (to get a token for the wrong cloud).
    """

    def __init__(self, double, lifetime=None, audience=None):
        self.double = double
        self.lifetime = lifetime
        self.audience = audience
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        del kwargs
        from azure.core.credentials import AccessToken  # pylint: disable=import-outside-toplevel

        self.scopes.append(scopes)
        scope = scopes[0]
        audience = self.audience or (scope[:-len(".default")] if scope.endswith(".default") else scope)
        token, expires_on = self.double.issue_token(audience, lifetime=self.lifetime)
        return AccessToken(token, expires_on)


class ArmHttpError(Exception):
    """An ARM error answer."""

    def __init__(self, status, code, message, headers=None):
        super().__init__("%s %s: %s" % (status, code, message))
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


class Fault:
    def __init__(self, kind, count=1, method=None, match=None, retry_after=None, code=None, message=None):
        if kind not in FAULT_KINDS:
            raise ValueError("fault kind must be one of %s, got %r" % (", ".join(FAULT_KINDS), kind))
        self.kind = kind
        self.count = int(count)
        self.method = method.upper() if method else None
        self.match = match.lower() if match else None
        self.retry_after = retry_after
        self.code = code
        self.message = message

    def matches(self, method, path):
        return self.count > 0 and (self.method is None or self.method == method) and (
            self.match is None or self.match in path.lower())

    def as_dict(self):
        return dict(kind=self.kind, count=self.count, method=self.method, match=self.match,
                    retry_after=self.retry_after, code=self.code, message=self.message)


class Operation:
    def __init__(self, kind, key, location, fail=None):
        self.id = str(uuid.uuid4())
        self.kind = kind  # create | update | delete
        self.key = key  # (sub, rg, cluster, pool), lower-case
        self.location = location
        self.fail = fail  # (code, message) or None
        self.polls = 0
        self.started = time.time()
        self.start_text = _now_text()
        self.status = "InProgress"
        self.end_text = None
        self.error = None

    def document(self):
        doc = dict(id=None, name=self.id, status=self.status, startTime=self.start_text)
        if self.end_text:
            doc["endTime"] = self.end_text
        if self.error:
            doc["error"] = dict(self.error)
        return doc


def _now_text():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


class ArmDouble:
    """The double: state, faults, request log, and the HTTP server around them."""

    def __init__(self, subscription=DEFAULT_SUBSCRIPTION, lro_polls=2, lro_seconds=0.0, retry_after=1,
                 lro_style="async", audiences=DEFAULT_AUDIENCES, tokens=(), token_lifetime=3600,
                 api_versions=(API_VERSION,)):
        if lro_style not in LRO_STYLES:
            raise ValueError("lro_style must be one of %s" % ", ".join(LRO_STYLES))
        self.subscription = subscription
        self.lro_polls = lro_polls
        self.lro_seconds = lro_seconds
        self.retry_after = retry_after
        self.lro_style = lro_style
        self.audiences = set(a.rstrip("/").lower() for a in audiences)
        self.token_lifetime = token_lifetime
        self.api_versions = tuple(api_versions)
        self.msi_header = "msi-" + uuid.uuid4().hex
        self.lock = threading.RLock()
        self.subscriptions = {subscription.lower(): subscription}
        self.resource_groups = {}  # (sub, rg) -> {name, location}
        self.clusters = {}  # (sub, rg, c) -> document
        self.pools = {}  # (sub, rg, c, p) -> document
        self.pool_ops = {}  # (sub, rg, c, p) -> running Operation
        self.operations = {}  # id -> Operation
        self.faults = []
        self.requests = []
        self.tokens = {}  # token -> (audience, expires_at)
        for token in tokens:
            self.tokens[token] = (None, float("inf"))
        self._server = None
        self._thread = None

    # ------------------------------------------------------------------ lifecycle

    def start(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="arm-double", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        """Base URL to use as ``arm_endpoint`` (ends with ``/``)."""
        return "http://127.0.0.1:%d/" % self._server.server_address[1]

    @property
    def msi_endpoint(self):
        """Value for ``IDENTITY_ENDPOINT`` (App Service managed identity)."""
        return self.url + "msi/token"

    def msi_environment(self):
        """Environment variables that make azure-identity's DefaultAzureCredential use this double."""
        return dict(IDENTITY_ENDPOINT=self.msi_endpoint, IDENTITY_HEADER=self.msi_header)

    # ------------------------------------------------------------------ in-process API: state

    def issue_token(self, audience="https://management.azure.com/", lifetime=None):
        """A bearer token the double accepts (for ``audience``), valid for ``lifetime`` seconds."""
        token = "dbl." + uuid.uuid4().hex
        with self.lock:
            self.tokens[token] = (audience.rstrip("/").lower(), time.time() + (
                self.token_lifetime if lifetime is None else lifetime))
        return token, int(time.time() + (self.token_lifetime if lifetime is None else lifetime))

    def credential(self, lifetime=None, audience=None):
        """A DoubleCredential for this double (pass it to ArmSession as ``credential``)."""
        return DoubleCredential(self, lifetime=lifetime, audience=audience)

    def add_resource_group(self, name, location="eastus", subscription=None):
        sub = (subscription or self.subscription)
        with self.lock:
            self.subscriptions.setdefault(sub.lower(), sub)
            self.resource_groups[(sub.lower(), name.lower())] = dict(name=name, location=location)

    def add_cluster(self, resource_group, name, location="eastus", kubernetes_version="1.33.2",
                    subscription=None, system_pool="nodepool1"):
        """A Succeeded managed cluster (and its resource group), with one System pool unless system_pool is None."""
        sub = subscription or self.subscription
        self.add_resource_group(resource_group, location, sub)
        key = (sub.lower(), resource_group.lower(), name.lower())
        cluster_id = "/subscriptions/%s/resourcegroups/%s/providers/%s/managedClusters/%s" % (
            sub, resource_group, PROVIDER, name)
        document = dict(
            id=cluster_id, name=name, type=CLUSTER_TYPE, location=location,
            properties=dict(
                provisioningState="Succeeded", powerState=dict(code="Running"),
                kubernetesVersion=kubernetes_version, currentKubernetesVersion=kubernetes_version,
                dnsPrefix="%s-dns" % name, fqdn="%s-dns-%s.hcp.%s.azmk8s.io" % (name, uuid.uuid4().hex[:8], location),
                nodeResourceGroup="MC_%s_%s_%s" % (resource_group, name, location),
                enableRBAC=True,
            ),
        )
        with self.lock:
            self.clusters[key] = document
        if system_pool:
            self.put_pool_state(resource_group, name, system_pool, dict(
                vmSize="Standard_D4ds_v5", count=2, mode="System"), subscription=sub)
        return copy.deepcopy(document)

    def put_pool_state(self, resource_group, cluster, pool, properties, subscription=None, state="Succeeded"):
        """Put a pool straight into the state (no request, no operation): for pre-existing pools."""
        sub = subscription or self.subscription
        key = (sub.lower(), resource_group.lower(), cluster.lower(), pool.lower())
        with self.lock:
            cluster_doc = self.clusters[key[:3]]
            document = self._new_pool_document(sub, resource_group, cluster_doc, pool, properties)
            document["properties"]["provisioningState"] = state
            self.pools[key] = document
            return copy.deepcopy(document)

    def pool(self, resource_group, cluster, name, subscription=None):
        """The stored pool document (a copy), or None."""
        sub = subscription or self.subscription
        with self.lock:
            document = self.pools.get((sub.lower(), resource_group.lower(), cluster.lower(), name.lower()))
            return copy.deepcopy(document)

    def pool_names(self, resource_group, cluster, subscription=None):
        sub = (subscription or self.subscription).lower()
        with self.lock:
            return sorted(doc["name"] for key, doc in self.pools.items()
                          if key[:3] == (sub, resource_group.lower(), cluster.lower()))

    def finish_operations(self):
        """Let every running operation finish now (as if the client had waited)."""
        with self.lock:
            for operation in list(self.operations.values()):
                if operation.status == "InProgress":
                    operation.polls = max(operation.polls, self.lro_polls)
                    operation.started -= self.lro_seconds
                    self._advance(operation, count=False)

    # ------------------------------------------------------------------ in-process API: faults and log

    def fault(self, kind, count=1, method=None, match=None, retry_after=None, code=None, message=None):
        """Inject a fault (see the module docstring); returns it."""
        fault = Fault(kind, count, method, match, retry_after, code, message)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self):
        with self.lock:
            self.faults = []

    def requests_for(self, method=None, contains=None):
        """Logged requests (dicts: method, path, query, body, status, authorized) matching the filters."""
        with self.lock:
            return [dict(r) for r in self.requests
                    if (method is None or r["method"] == method.upper())
                    and (contains is None or contains.lower() in r["path"].lower())]

    def clear_requests(self):
        with self.lock:
            self.requests = []

    def _take_fault(self, method, path, kinds):
        with self.lock:
            for fault in self.faults:
                if fault.kind in kinds and fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None

    # ------------------------------------------------------------------ request handling

    def handle(self, method, raw_path, headers, raw_body):
        """(status, headers, body-or-None, after) for one request; ``after`` is 'reset' or None."""
        split = urlsplit(raw_path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        entry = dict(method=method, path=path, query=query, body=None, status=None,
                     authorized=False, time=time.time())
        with self.lock:
            self.requests.append(entry)
        try:
            body = json.loads(raw_body.decode("utf-8")) if raw_body else None
        except ValueError:
            body = raw_body.decode("utf-8", "replace")
        entry["body"] = body
        status, out_headers, out_body, after = self._dispatch(method, path, query, headers, body, raw_body, entry)
        entry["status"] = "reset" if after == "reset" else status
        return status, out_headers, out_body, after

    def _dispatch(self, method, path, query, headers, body, raw_body, entry):  # pylint: disable=too-many-return-statements
        if path.startswith("/_double/"):
            return self._control(method, path, body)
        if path == "/msi/token":
            return self._msi(query, headers)
        fault = self._take_fault(method, path, ("reset",))
        if fault:
            return 0, {}, None, "reset"
        fault = self._take_fault(method, path, ("throttle", "unavailable"))
        if fault:
            return self._fault_answer(fault)
        fault = self._take_fault(method, path, ("echo_auth",))
        if fault:
            status = int(fault.code or 401)
            return status, {}, dict(error=dict(code="InvalidAuthenticationToken" if status == 401 else "InternalError",
                                               message=echo(headers.get("Authorization") or ""))), None
        try:
            self._authenticate(headers)
            entry["authorized"] = True
            version = query.get("api-version")
            if not version:
                raise ArmHttpError(400, "MissingApiVersionParameter",
                                   "The api-version query parameter (?api-version=) is required for all requests.")
            if version not in self.api_versions:
                raise ArmHttpError(400, "NoRegisteredProviderFound", (
                    "No registered resource provider found for location 'eastus' and API version '%s' for type "
                    "'managedClusters'. The supported api-versions are '%s'.") % (version, "', '".join(self.api_versions)))
            if method in ("PUT", "PATCH", "POST") and raw_body and not isinstance(body, (dict, list)):
                raise ArmHttpError(400, "InvalidRequestContent",
                                   "The request content was invalid and could not be deserialized.")
            commit_fault = self._take_fault(method, path, ("commit_then_reset",))
            status, out_headers, out_body = self._route(method, path, body)
            if commit_fault:
                return status, out_headers, out_body, "reset"
            return status, out_headers, out_body, None
        except ArmHttpError as exc:
            headers = dict(exc.headers)
            return exc.status, headers, dict(error=dict(code=exc.code, message=exc.message)), None

    def _fault_answer(self, fault):
        if fault.kind == "throttle":
            retry_after = fault.retry_after if fault.retry_after is not None else 1
            return 429, {"Retry-After": str(retry_after)}, dict(error=dict(
                code=fault.code or "TooManyRequests",
                message=fault.message or "The request is being throttled as the limit has been reached for "
                                         "operation type - Write_ObservationWindow_00:01:00. Please retry after %s "
                                         "seconds." % retry_after)), None
        out = {}
        if fault.retry_after is not None:
            out["Retry-After"] = str(fault.retry_after)
        return 503, out, dict(error=dict(code=fault.code or "ServiceUnavailable",
                                         message=fault.message or "The service is temporarily unavailable.")), None

    def _authenticate(self, headers):
        value = headers.get("Authorization") or ""
        challenge = {"WWW-Authenticate": 'Bearer authorization_uri="https://login.microsoftonline.com/common", '
                                         'error="invalid_token", error_description="The authentication failed."'}
        if not value:
            raise ArmHttpError(401, "AuthenticationFailed",
                               "Authentication failed. The 'Authorization' header is missing.", challenge)
        scheme, dummy, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ArmHttpError(401, "AuthenticationFailed",
                               "Authentication failed. The 'Authorization' header is provided in an invalid format.",
                               challenge)
        with self.lock:
            known = self.tokens.get(token.strip())
        if known is None:
            raise ArmHttpError(401, "InvalidAuthenticationToken", "The access token is invalid.", challenge)
        audience, expires_at = known
        if time.time() >= expires_at:
            raise ArmHttpError(401, "ExpiredAuthenticationToken", (
                "The access token expiry UTC time '%s' is earlier than current UTC time '%s'.") % (
                time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime(expires_at)),
                time.strftime("%m/%d/%Y %H:%M:%S", time.gmtime())), challenge)
        if audience is not None and audience not in self.audiences:
            raise ArmHttpError(401, "InvalidAuthenticationTokenAudience", (
                "The access token has been obtained for wrong audience or resource '%s'. It should exactly match "
                "with one of the allowed audiences '%s'.") % (audience, "','".join(sorted(self.audiences))), challenge)

    def _msi(self, query, headers):
        if headers.get("X-IDENTITY-HEADER") != self.msi_header:
            return 401, {}, dict(error=dict(code="Unauthorized", message="X-IDENTITY-HEADER is missing or wrong")), None
        resource = query.get("resource")
        if not resource or query.get("api-version") != "2019-08-01":
            return 400, {}, dict(error=dict(code="BadRequest", message="resource and api-version=2019-08-01 are required")), None
        token, expires_on = self.issue_token(resource)
        return 200, {}, dict(access_token=token, expires_on=str(expires_on), resource=resource, token_type="Bearer",
                             client_id="00000000-0000-0000-0000-0000000000c1"), None

    def _control(self, method, path, body):
        try:
            if method == "POST" and path == "/_double/faults":
                fault = self.fault(**(body or {}))
                return 201, {}, fault.as_dict(), None
            if method == "DELETE" and path == "/_double/faults":
                self.clear_faults()
                return 204, {}, None, None
            if method == "GET" and path == "/_double/requests":
                with self.lock:
                    return 200, {}, dict(value=[dict(r) for r in self.requests if not r["path"].startswith("/_double/")]), None
            if method == "POST" and path == "/_double/clusters":
                return 201, {}, self.add_cluster(**(body or {})), None
            if method == "POST" and path == "/_double/tokens":
                token, expires_on = self.issue_token(**(body or {}))
                return 201, {}, dict(token=token, expires_on=expires_on), None
            if method == "GET" and path == "/_double/state":
                with self.lock:
                    return 200, {}, dict(clusters=list(self.clusters.values()), pools=list(self.pools.values())), None
        except (TypeError, ValueError, KeyError) as exc:
            return 400, {}, dict(error=dict(code="BadControlRequest", message=str(exc))), None
        return 404, {}, dict(error=dict(code="NotFound", message="no such control endpoint")), None

    # ------------------------------------------------------------------ ARM routing

    def _route(self, method, path, body):
        match = _ARM_PATH.match(path)
        if not match:
            raise ArmHttpError(404, "InvalidResourceType", "The resource type could not be found for path '%s'." % path)
        parts = match.groupdict()
        with self.lock:
            sub = parts["sub"].lower()
            if sub not in self.subscriptions:
                raise ArmHttpError(404, "SubscriptionNotFound", "The subscription '%s' could not be found." % parts["sub"])
            if parts["op"]:
                if method != "GET" or parts["rg"]:
                    raise ArmHttpError(405, "MethodNotAllowed", "The requested method is not allowed.")
                return self._operation(parts["opkind"].lower(), parts["op"])
            if not parts["rg"]:
                raise ArmHttpError(404, "InvalidResourceType", "The resource type could not be found.")
            if (sub, parts["rg"].lower()) not in self.resource_groups:
                raise ArmHttpError(404, "ResourceGroupNotFound", "Resource group '%s' could not be found." % parts["rg"])
            if not parts["cluster"]:
                raise ArmHttpError(404, "InvalidResourceType", "The resource type could not be found.")
            cluster_key = (sub, parts["rg"].lower(), parts["cluster"].lower())
            cluster = self.clusters.get(cluster_key)
            if cluster is None:
                raise ArmHttpError(404, "ResourceNotFound", (
                    "The Resource '%s/managedClusters/%s' under resource group '%s' was not found. For more details "
                    "please go to https://aka.ms/ARMResourceNotFoundFix") % (PROVIDER, parts["cluster"], parts["rg"]))
            if not parts["pools"]:
                if method != "GET":
                    raise ArmHttpError(405, "MethodNotAllowed", "The double serves GET on managed clusters only.")
                return 200, {}, self._cluster_document(cluster_key, cluster)
            if not parts["pool"]:
                if method != "GET":
                    raise ArmHttpError(405, "MethodNotAllowed", "The requested method is not allowed.")
                return 200, {}, dict(value=[self._read_pool(key) for key in sorted(self.pools) if key[:3] == cluster_key])
            key = cluster_key + (parts["pool"].lower(),)
            if method == "GET":
                if key not in self.pools:
                    raise ArmHttpError(404, "NotFound", "Could not find agent pool '%s' in managed cluster '%s'." % (
                        parts["pool"], cluster["name"]))
                return 200, {}, self._read_pool(key)
            if method == "PUT":
                return self._put_pool(key, parts, cluster, body)
            if method == "DELETE":
                return self._delete_pool(key, cluster)
            raise ArmHttpError(405, "MethodNotAllowed", "The requested method is not allowed.")

    def _cluster_document(self, cluster_key, cluster):
        document = copy.deepcopy(cluster)
        profiles = []
        for key in sorted(self.pools):
            if key[:3] == cluster_key:
                pool = self._read_pool(key)
                profile = dict(name=pool["name"])
                profile.update({k: v for k, v in pool["properties"].items() if k not in ("eTag",)})
                profiles.append(profile)
        document["properties"]["agentPoolProfiles"] = profiles
        return document

    def _read_pool(self, key):
        operation = self.pool_ops.get(key)
        if operation is not None:
            self._advance(operation)
        document = self.pools.get(key)
        return copy.deepcopy(document) if document is not None else None

    def _new_pool_document(self, sub, resource_group, cluster, name, properties):
        version = properties.get("orchestratorVersion") or cluster["properties"]["kubernetesVersion"]
        props = dict(
            count=1, vmSize=None, osDiskSizeGB=128, osDiskType="Managed", kubeletDiskType="OS", maxPods=110,
            type="VirtualMachineScaleSets", mode="User", osType="Linux", osSKU="Ubuntu",
            enableAutoScaling=False, enableNodePublicIP=False, enableFIPS=False, scaleDownMode="Delete",
            powerState=dict(code="Running"), upgradeSettings=dict(maxSurge="10%"),
        )
        props.update(copy.deepcopy(properties))
        props["orchestratorVersion"] = version
        props["currentOrchestratorVersion"] = _full_version(version, cluster["properties"]["kubernetesVersion"])
        azure_linux = props["osSKU"].lower() in AZURE_LINUX_SKUS
        props["nodeImageVersion"] = "AKS%s-202611.01.0" % ("AzureLinux-V3gen2" if azure_linux else "Ubuntu-2204gen2containerd")
        props["eTag"] = uuid.uuid4().hex
        return dict(
            id="/subscriptions/%s/resourcegroups/%s/providers/%s/managedClusters/%s/agentPools/%s" % (
                self.subscriptions.get(sub.lower(), sub), resource_group, PROVIDER, cluster["name"], name),
            name=name, type=POOL_TYPE, properties={k: v for k, v in props.items() if v is not None})

    def _put_pool(self, key, parts, cluster, body):
        problems = validate("AgentPool", body, readonly="ignore")
        if problems:
            raise ArmHttpError(400, "InvalidRequestContent",
                               "The request content was invalid and could not be deserialized: %s" % "; ".join(problems))
        name = parts["pool"]
        current = self.pools.get(key)
        running = self.pool_ops.get(key)
        if running is not None and running.status == "InProgress":
            raise ArmHttpError(409, "OperationNotAllowed", (
                "Operation is not allowed: Another operation (%s) is in progress, please wait for it to finish "
                "before starting a new operation.") % current["properties"]["provisioningState"])
        writable = {k: v for k, v in (body.get("properties") or {}).items()
                    if k not in ("provisioningState", "currentOrchestratorVersion", "eTag") and v is not None}
        if current is not None:
            name = current["name"]
            old = current["properties"]
            for field in IMMUTABLE:
                if field not in writable and field in old:
                    writable[field] = copy.deepcopy(old[field])
            changed = [f for f in IMMUTABLE if f in writable and not _same_value(writable.get(f), old.get(f))]
            if changed:
                raise ArmHttpError(400, "PropertyChangeNotAllowed", " ".join(
                    "Changing property '%s' is not allowed." % f for f in changed))
        elif not POOL_NAME.match(name):
            raise ArmHttpError(400, "InvalidParameter", (
                "The value of parameter agentPoolProfile.name is invalid: '%s'. Agent pool names must start with a "
                "lowercase letter, have at most 12 characters and contain only lowercase letters and numbers.") % name)
        self._check_pool_rules(cluster, current, writable)
        document = self._new_pool_document(key[0], parts["rg"] if current is None else _rg_of(current),
                                           cluster, name, writable)
        kind = "create" if current is None else "update"
        document["properties"]["provisioningState"] = "Creating" if current is None else "Updating"
        if current is not None:
            document["id"] = current["id"]
        self.pools[key] = document
        operation = self._start(kind, key, cluster, "PUT", self.pools[key])
        status = 201 if current is None else 200
        return status, self._lro_headers(operation, "PUT", key), copy.deepcopy(document)

    def _check_pool_rules(self, cluster, current, props):  # pylint: disable=too-many-branches
        if not props.get("vmSize"):
            raise ArmHttpError(400, "InvalidParameter", "The value of parameter agentPoolProfile.vmSize is invalid: "
                                                        "a VM size is required.")
        mode = props.get("mode", "User")
        count = props.get("count", 1)
        low = 1 if mode == "System" else 0
        if not low <= count <= 1000:
            raise ArmHttpError(400, "InvalidParameter", (
                "The value of parameter agentPoolProfile.count is invalid: %s. It must be in the range of %d to 1000 "
                "(inclusive) for %s pools.") % (count, low, mode.lower()))
        if props.get("enableAutoScaling"):
            low_count, high_count = props.get("minCount"), props.get("maxCount")
            if low_count is None or high_count is None:
                raise ArmHttpError(400, "InvalidParameter",
                                   "minCount and maxCount are required when enableAutoScaling is true.")
            if low_count > high_count:
                raise ArmHttpError(400, "InvalidParameter", "minCount (%s) must be less than or equal to maxCount (%s)."
                                   % (low_count, high_count))
            if "count" in props and not low_count <= count <= high_count:
                raise ArmHttpError(400, "InvalidParameter", "count (%s) must be between minCount (%s) and maxCount (%s)."
                                   % (count, low_count, high_count))
        elif props.get("minCount") is not None or props.get("maxCount") is not None:
            raise ArmHttpError(400, "InvalidParameter",
                               "minCount and maxCount must be nil when enableAutoScaling is false.")
        profile = props.get("gpuInstanceProfile")
        if profile:
            if props.get("enableAutoScaling"):
                raise ArmHttpError(400, "InvalidParameter", "The cluster autoscaler is not supported on multi-instance "
                                                            "GPU node pools (gpuInstanceProfile %s)." % profile)
            sku = (props.get("osSKU") or "Ubuntu").lower()
            if sku in AZURE_LINUX_SKUS:
                raise ArmHttpError(400, "InvalidParameter",
                                   "Multi-instance GPU node pools are not supported on osSKU %s." % props["osSKU"])
            if sku.startswith(WINDOWS_PREFIX) or props.get("osType") == "Windows":
                raise ArmHttpError(400, "InvalidParameter", "Multi-instance GPU is not supported on Windows node pools.")
            if props["vmSize"].lower() not in MIG_VM_SIZES:
                raise ArmHttpError(400, "InvalidParameter", "gpuInstanceProfile %s is not supported for VM size %s: it "
                                                            "is not a multi-instance GPU capable size."
                                   % (profile, props["vmSize"]))
        for index, taint in enumerate(props.get("nodeTaints") or []):
            if not TAINT.match(taint):
                raise ArmHttpError(400, "InvalidParameter", (
                    "The value of parameter agentPoolProfile.nodeTaints[%d] is invalid: '%s'. Taints must look like "
                    "key=value:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute.") % (index, taint))
        cluster_version = cluster["properties"]["kubernetesVersion"]
        wanted = props.get("orchestratorVersion")
        if wanted:
            if _version_tuple(wanted)[:2] > _version_tuple(cluster_version)[:2] or (
                    len(_version_tuple(wanted)) == 3 and _version_tuple(wanted) > _version_tuple(cluster_version)):
                raise ArmHttpError(400, "NodePoolMcVersionIncompatible", (
                    "Node pool version %s and control plane version %s are incompatible. Node pool version cannot be "
                    "newer than the control plane version.") % (wanted, cluster_version))
            if current is not None:
                have = current["properties"].get("currentOrchestratorVersion") or current["properties"].get(
                    "orchestratorVersion")
                if _version_tuple(wanted) < _version_tuple(have)[:len(_version_tuple(wanted))]:
                    raise ArmHttpError(400, "NotAllowedAgentPoolVersionDowngrade", (
                        "Downgrading a node pool from %s to %s is not allowed.") % (have, wanted))

    def _delete_pool(self, key, cluster):
        current = self.pools.get(key)
        if current is None:
            return 204, {}, None
        running = self.pool_ops.get(key)
        if running is not None and running.status == "InProgress":
            raise ArmHttpError(409, "OperationNotAllowed", (
                "Operation is not allowed: Another operation (%s) is in progress, please wait for it to finish "
                "before starting a new operation.") % current["properties"]["provisioningState"])
        if current["properties"].get("mode") == "System":
            systems = [k for k, doc in self.pools.items()
                       if k[:3] == key[:3] and doc["properties"].get("mode") == "System"]
            if len(systems) <= 1:
                raise ArmHttpError(400, "OperationNotAllowed", (
                    "The agent pool '%s' is the last System pool of managed cluster '%s' and cannot be deleted.") % (
                    current["name"], cluster["name"]))
        current["properties"]["provisioningState"] = "Deleting"
        operation = self._start("delete", key, cluster, "DELETE", current)
        return 202, self._lro_headers(operation, "DELETE", key), None

    # ------------------------------------------------------------------ operations

    def _start(self, kind, key, cluster, method, document):
        fault = self._take_fault(method, "/".join(("",) + key), ("lro_failed",)) or self._take_fault(
            method, document["id"], ("lro_failed",))
        fail = None
        if fault:
            fail = (fault.code or "OverconstrainedAllocationRequest", fault.message or (
                "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition "
                "is too restrictive. Please remove some constraints and try again."))
        operation = Operation(kind, key, cluster["location"], fail)
        self.operations[operation.id] = operation
        self.pool_ops[key] = operation
        return operation

    def _lro_headers(self, operation, method, key):
        headers = {"Retry-After": str(self.retry_after)}
        base = "%ssubscriptions/%s/providers/%s/locations/%s" % (
            self.url, self.subscriptions[key[0]], PROVIDER, operation.location)
        status_url = "%s/operations/%s?api-version=%s" % (base, operation.id, self.api_versions[0])
        result_url = "%s/operationresults/%s?api-version=%s" % (base, operation.id, self.api_versions[0])
        if self.lro_style == "async" and method != "DELETE":
            headers["Azure-AsyncOperation"] = status_url
        elif self.lro_style in ("async", "location"):
            headers["Location"] = result_url
        return headers

    def _advance(self, operation, count=True):
        if operation.status != "InProgress":
            return
        if count:
            operation.polls += 1
        if operation.polls <= self.lro_polls or time.time() - operation.started < self.lro_seconds:
            return
        operation.end_text = _now_text()
        document = self.pools.get(operation.key)
        if operation.fail:
            operation.status = "Failed"
            operation.error = dict(code=operation.fail[0], message=operation.fail[1])
            if document is not None:
                document["properties"]["provisioningState"] = "Failed"
        else:
            operation.status = "Succeeded"
            if operation.kind == "delete":
                self.pools.pop(operation.key, None)
            elif document is not None:
                document["properties"]["provisioningState"] = "Succeeded"
        if self.pool_ops.get(operation.key) is operation:
            self.pool_ops.pop(operation.key, None)

    def _operation(self, opkind, operation_id):
        operation = self.operations.get(operation_id)
        if operation is None:
            raise ArmHttpError(404, "NotFound", "Operation '%s' was not found." % operation_id)
        self._advance(operation)
        retry = {"Retry-After": str(self.retry_after)}
        if opkind == "operations":
            document = operation.document()
            document["id"] = "/subscriptions/%s/providers/%s/locations/%s/operations/%s" % (
                self.subscriptions[operation.key[0]], PROVIDER, operation.location, operation.id)
            return 200, retry if operation.status == "InProgress" else {}, document
        if operation.status == "InProgress":
            return 202, dict(retry, Location="%s?api-version=%s" % (
                self.url + "subscriptions/%s/providers/%s/locations/%s/operationresults/%s" % (
                    self.subscriptions[operation.key[0]], PROVIDER, operation.location, operation.id),
                self.api_versions[0])), None
        if operation.status == "Failed":
            raise ArmHttpError(500 if operation.fail[0] == "InternalOperationError" else 400,
                               operation.error["code"], operation.error["message"])
        if operation.kind == "delete":
            return 204, {}, None
        document = self.pools.get(operation.key)
        return 200, {}, copy.deepcopy(document)


def _rg_of(document):
    return document["id"].split("/")[4]


def _same_value(left, right):
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    return left == right


def _version_tuple(text):
    try:
        return tuple(int(p) for p in str(text).split("."))
    except ValueError:
        return (0,)


def _full_version(wanted, cluster_version):
    if len(_version_tuple(wanted)) == 3:
        return wanted
    if _version_tuple(cluster_version)[:2] == _version_tuple(wanted)[:2]:
        return cluster_version
    return wanted + ".0"


def _handler_for(double):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "arm-double/1"

        def log_message(self, format, *args):  # pylint: disable=redefined-builtin
            del format, args

        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw_body = self.rfile.read(length) if length else b""
            status, headers, body, after = double.handle(self.command, self.path, self.headers, raw_body)
            if after == "reset":
                self.close_connection = True
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                except OSError:
                    pass
                return
            payload = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("x-ms-request-id", str(uuid.uuid4()))
            if payload:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if payload:
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

    return Handler


def main(argv=None):
    """Run the double on its own: ``python -m ...tests.doubles.arm [--cluster rg/name] [--port N]``."""
    import argparse  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cluster", action="append", default=[], help="resource-group/cluster to create")
    parser.add_argument("--lro-polls", type=int, default=2)
    args = parser.parse_args(argv)
    double = ArmDouble(lro_polls=args.lro_polls).start()
    for item in args.cluster:
        group, name = item.split("/", 1)
        double.add_cluster(group, name)
    print(json.dumps(dict(url=double.url, subscription=double.subscription, **double.msi_environment())), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        double.stop()


if __name__ == "__main__":
    main()
