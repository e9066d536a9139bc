# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict, stateful Kubernetes API double on 127.0.0.1, for kubernetes.core and the python client.

Start it, point clients at its kubeconfig, drive its tiny controllers, assert on its request log::

    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble

    with K8sDouble() as k8s:                       # a thread serving HTTP; stop() on exit
        k8s.add_node("gpu-0", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
                     allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
        env = {"K8S_AUTH_KUBECONFIG": k8s.kubeconfig}     # for ansible-playbook subprocesses
        client = k8s.api_client()                          # kubernetes.client.ApiClient, in process
        ...
        k8s.get("DaemonSet", "nccl-installer", "kube-system")["status"]
        assert not k8s.writes()                            # persisted POST/PUT/PATCH/DELETE

Why not kmock as a server: kmock 0.8's emulator answers POST /api/v1/namespaces with 500, PUT with
404, ignores dryRun and selectors, adds no server metadata and validates nothing, and its async
fixture deadlocks with the synchronous client. Overriding all of that left nothing of it but the
discovery data, so this double is a small threaded ``http.server`` that takes its built-in resource
list (plurals, scopes, verbs, short names, subresources) from kmock's bundled k3s discovery dump,
and its schemas from kubernetes-validate (built-ins) and ``tests/contract/crd_schemas`` (custom
resources), through ``tests/contract/k8s_validation``.

``K8sDouble(tls=True)`` serves HTTPS with a self-signed CA of its own (in the kubeconfig as
``certificate-authority-data``, and in ``ca_file``): clients that read a kubeconfig through client-go
(helm, kubectl) send credentials only over TLS. The ``helm_k8s`` fixture of tests/integration/conftest.py
is such a double with the environment helm needs (see tests/charts/README.md).

What it does like a real API server (Kubernetes 1.33):

- Discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>[/<version>]``, with
  subresources (``pods/log``, ``*/status``...). OpenAPI v3: the ``/openapi/v3`` index and one document
  per group-version with every resource's paths and operations (``x-kubernetes-group-version-kind``, the
  ``dryRun``/``fieldManager``/``fieldValidation`` parameters), which is what helm and kubectl read to
  learn that the server validates fields itself; the documents carry no ``components.schemas``. Custom resources from ``crd_schemas`` are registered
  at start (``crds=`` picks which), each with a CustomResourceDefinition object; POSTing a
  CustomResourceDefinition registers its served versions (validated with its openAPIV3Schema made
  strict) and deleting it removes the resource and its objects.
- Bearer-token authentication (401 without the kubeconfig's token).
- RBAC for limited identities: ``grant(rules)`` (a ClusterRole's rules, or the ClusterRole document) returns a
  bearer token (``write_kubeconfig(path, token=...)`` writes a kubeconfig for it) that is allowed exactly what
  the rules match, with the rule matching of kubernetes pkg/apis/rbac/v1/evaluation_helpers.go (verbs,
  apiGroups, resources with ``*`` and ``*/sub``, resourceNames, nonResourceURLs with a trailing ``*``) and
  the discovery paths every authenticated user has (the bootstrap roles system:discovery and
  system:public-info-viewer); anything else is a 403 ``Forbidden`` Status in the API server's shape
  (apiserver endpoints/handlers/responsewriters/errors.go: ``<resource>[.group] is forbidden: User "<user>"
  cannot <verb> resource "<resource>[/sub]" in API group "<group>" at the cluster scope``, or ``in the
  namespace "<ns>"``). The request log keeps the identity (``Request.user``; None for the double's own token).
- create / get / list / replace (PUT) / patch / delete / deletecollection, for cluster-scoped and
  namespaced resources, with the real status codes and ``Status`` bodies: 404 NotFound (also for a
  missing namespace on create), 409 AlreadyExists, 409 Conflict (stale ``resourceVersion``),
  400 BadRequest (namespace/name mismatch, bad JSON, bad selectors), 405 MethodNotAllowed (verb not
  in discovery), 415 UnsupportedMediaType (strategic merge patch on a custom resource, as the real
  server does; kubernetes.core then falls back to a merge patch), 422 Invalid (schema, names,
  labels, selectors, immutable fields, limits), with ``details.causes``.
- Bodies as JSON, and as Kubernetes protobuf (``application/vnd.kubernetes.protobuf``, what client-go
  typed clients send) for the messages helm writes: core/v1 Secret and DeleteOptions (see
  ``k8s_protobuf``); any other protobuf kind is a 415, an unknown protobuf field a 400. Answers are JSON.
- Helm 3 end to end (``helm install/upgrade/uninstall/history``, kubernetes.core.helm): its release
  storage is Secrets of type ``helm.sh/release.v1`` labelled ``owner=helm,name=<release>,status,version``,
  listed by label selector and replaced on status changes; chart objects are created with
  ``fieldManager=helm``, upgraded with strategic merge patches (helm sends JSON merge patches for
  custom resources, which the double takes too), and deleted on uninstall; ``helm --wait`` polls the objects the controllers below make ready.
- Patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902, with ``test``), strategic merge
  patch for built-ins driven by the schema's ``x-kubernetes-patch-merge-key``/``-strategy``
  (lists such as containers, env, volumes, ports merge by key; ``$patch: replace|delete`` and
  ``$setElementOrder``/``$retainKeys`` directives are accepted; the latter two are ignored).
- Server-set metadata: ``uid``, ``creationTimestamp``, ``resourceVersion`` (one cluster-wide
  counter, bumped only when the stored object really changes: a no-op update keeps it), and
  ``generation`` (kinds that track it, every custom resource; +1 when anything outside metadata and
  status changes). ``generateName``. Namespaces get ``kubernetes.io/metadata.name``.
- Defaulting of the fields that matter for idempotence: pod specs and containers
  (restartPolicy, dnsPolicy, schedulerName, terminationGracePeriodSeconds, securityContext,
  terminationMessagePath/Policy, imagePullPolicy, resources, port protocol, volume defaultMode,
  hostPath type, probe timings), DaemonSet/Deployment/StatefulSet/Job specs, Job selectors and
  labels, Service type/IP/ports, Secret type. Pods get requests copied from limits.
- Status subresources: writes to the main resource keep the stored status; ``/status`` writes
  change only the status.
- Immutable fields: workload ``spec.selector``, Job ``spec.template``, StatefulSet spec fields other
  than replicas/template/updateStrategy/..., Pod spec fields other than images/tolerations/
  activeDeadlineSeconds, ``immutable`` ConfigMaps/Secrets, Service clusterIP, PVC spec, custom
  resource fields a schema lists under ``x-kubernetes-crd.immutable``.
- ``dryRun=All`` on every write: fully validated and answered, nothing stored (kubernetes.core's
  check mode relies on this). Any other dryRun value is a 400.
- ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``) and
  ``fieldSelector`` (``metadata.name``, ``metadata.namespace`` everywhere; the pod, node, secret,
  event fields the real server supports) on list and deletecollection; an unsupported field is a 400.
- List responses carry ``kind: <Kind>List``, ``apiVersion`` and ``metadata.resourceVersion``; built-in
  items carry no apiVersion/kind (as the real server sends them), custom resource items do.
- Deletion: finalizers hold an object with ``deletionTimestamp`` until they are removed;
  ``ownerReferences`` cascade (background), ``propagationPolicy: Orphan`` does not; deleting a
  Namespace deletes what is in it (at once, no Terminating phase); DeleteOptions preconditions.
- Pod logs (``GET pods/<name>/log``, ``container``, ``tailLines``): scripted with ``script_pod`` or
  ``set_pod_log``; a multi-container pod without ``container`` is a 400, as in the real server.
- ``scale`` subresource (autoscaling/v1 Scale, kubernetes.core.k8s_scale) and ``pods/<name>/eviction``
  (kubernetes.core.k8s_drain; deletes the pod, PodDisruptionBudgets are not evaluated).
- ``pods/<name>/exec`` over websocket (``v4.channel.k8s.io``, what kubernetes.core.k8s_exec and the
  python client's ``stream`` speak) for commands scripted with ``script_exec(pod, command, stdout,
  stderr, rc)``: stdout/stderr channels and the exit status; the pod must exist and be Running, the
  container must be named when the pod has several. A command no script matches is refused (400).

Controllers (level-triggered, run after every stored write and before every request; on by
default, ``controllers=False`` turns them off and ``reconcile()`` runs them by hand):

- Nodes: ``add_node(name, labels, allocatable, taints, ready)``; ``never_ready(node)`` makes the
  pods on that node never ready (failure paths).
- DaemonSet: one Pod per eligible node (nodeSelector, required nodeAffinity terms with
  In/NotIn/Exists/DoesNotExist/Gt/Lt and matchFields metadata.name, taints vs tolerations),
  and the status kubernetes.core's ``wait`` reads (desired/current/updated/ready/available/
  unavailable numbers, observedGeneration). ``ready_delay`` seconds after each generation change
  before pods count as ready.
- Deployment and StatefulSet: status only (no pods), ready when some node can run the pod; a Deployment
  also gets the ReplicaSet of its current pod template (``pod-template-hash``, owned by it), which
  ``helm --wait`` reads; earlier templates' ReplicaSets are scaled to 0.
- Job: one Pod; its outcome (phase, logs, delay) comes from ``script_pod``; Complete/Failed
  conditions, succeeded/failed counts.
- Pods: scheduled on the first node that fits (selectors, affinity, taints, free extended resources
  such as ``nvidia.com/gpu`` against ``allocatable``), else Pending/Unschedulable; phase from
  ``script_pod`` (default: Running and ready for restartPolicy Always, Succeeded otherwise).
- GKE multi-networking (``networking.gke.io``): GKENetworkParamSet Ready (reason GNPReady, or
  DeviceModeCantUseDefaultVPC / DeviceModeVPCAlreadyInUse / DeviceModeSubnetAlreadyInUse /
  SecondaryRangeAndDeviceModeUnspecified / GNPConfigInvalid), Network ParamsReady and Ready
  (GNPParamsReady / DeviceModeMissing / L3SecondaryMissing / GNPDeleted / ParamsNotReady /
  NetworkReady), reasons as the published API types name them.
- GPU Operator MIG manager (off until ``mig_manager(configs, delay, failing, stuck)``): on nodes labelled
  ``nvidia.com/gpu.deploy.mig-manager=true``, a new ``nvidia.com/mig.config`` value turns
  ``nvidia.com/mig.config.state`` to ``pending``, then after ``delay`` seconds to ``success`` or ``failed``
  (unknown or ``failing`` configs); ``stuck`` configs stay ``pending``. No GPU is modelled.
- Anything else: ``set_status`` (validated against the kind's schema: a status the CRD refuses raises
  ``ApiError`` 422) / ``set_condition`` (ClusterPolicy ``state: ready`` and so on).

Test hooks: ``script_pod`` / ``script_exec`` / ``set_pod_log`` (what pods do and print),
``requests()`` / ``writes()`` (the request log: verb, kind, name, namespace, status,
dry_run, and ``changed`` telling whether a write changed the stored object), ``clear_requests()``,
``fail(verb, kind, code, times)`` (fault injection: 429 with Retry-After, 500, 503, 409...),
``get``/``list``/``put``/``modify``/``remove`` (drift and seeding, bypassing the log).

What it CANNOT do (tests must stay away from these; they fail loudly where possible):

- Server-side apply (``application/apply-patch+yaml``, kubernetes.core ``server_side_apply``):
  415, no managedFields, no field ownership or conflicts.
- Watch (``?watch=true``): 400. kubernetes.core's ``wait`` polls with GET and works.
- Unscripted exec, stdin/tty exec, the v5 channel protocol, SPDY; ``kubernetes.core.k8s_cp`` (a tar
  stream over exec), attach, port-forward, proxy: 400. Binding, ephemeralcontainers, resize, token
  subresources: 404.
- Helm 4 (server-side apply, kstatus watches); ``/openapi/v2`` (404: it is protobuf only), OpenAPI
  schemas, protobuf bodies of other kinds and protobuf answers, Table output, aggregated discovery,
  pagination (``limit`` is ignored: lists are complete, no ``continue``). ``fieldManager`` is accepted
  and ignored (no managedFields).
- Unknown fields are rejected with 422 (``fieldValidation=Strict`` behaviour) rather than dropped
  with a warning (the default ``Warn``); custom resources get no schema defaults, no CEL rules
  (beyond ``immutable``), no conversion webhooks, one served version per CRD.
- Admission (webhooks, quotas, LimitRanges, Pod Security), RBAC beyond ``grant()`` (no Role/Binding objects
  are evaluated, no escalation checks, no impersonation), real
  scheduling (no preemption, no affinity weights, no spreading), Namespace Terminating phase,
  graceful pod deletion, events, leases, managedFields, ``resourceVersion`` semantics on reads
  (always the latest).
"""

from __future__ import annotations

import base64
import collections
import copy
import datetime
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import yaml

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.doubles import k8s_protobuf

SERVER_VERSION = "1.33.5"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
ALL_CRDS = None  # crds= default: every schema in tests/contract/crd_schemas

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_GENERATION_KINDS = frozenset((
    "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob", "CustomResourceDefinition",
    "PodDisruptionBudget", "NetworkPolicy", "ValidatingAdmissionPolicy", "HorizontalPodAutoscaler",
))
_WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"], "log": ["get"], "scale": ["get", "patch", "update"],
    "exec": ["create", "get"], "attach": ["create", "get"], "portforward": ["create", "get"],
    "proxy": ["create", "delete", "get", "patch", "update"], "eviction": ["create"], "binding": ["create"],
    "ephemeralcontainers": ["get", "patch", "update"], "resize": ["get", "patch", "update"],
    "token": ["create"], "finalize": ["update"], "approval": ["get", "patch", "update"],
}
_UPGRADE_SUBRESOURCES = ("exec", "attach", "portforward", "proxy")
_FIELD_SELECTORS = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": ("spec.unschedulable",),
    "Secret": ("type",),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type"),
    "Job": ("status.successful",),
}


class ApiError(Exception):
    """An error answered as a Kubernetes ``Status`` object."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details
        self.headers = headers or {}

    def body(self):
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            status["details"] = self.details
        return status


class ResourceType:
    """One served resource (group, version, plural) and what discovery says about it."""

    def __init__(self, group, version, kind, plural, namespaced, verbs, short_names=(), singular=None,
                 subresources=(), custom=False, validator=None, immutable=()):
        self.group, self.version, self.kind, self.plural = group, version, kind, plural
        self.namespaced, self.verbs, self.short_names = namespaced, tuple(verbs), tuple(short_names)
        self.singular = singular or kind.lower()
        self.subresources = frozenset(subresources)
        self.custom = custom
        self.validator = validator
        self.immutable = tuple(immutable)

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    @property
    def qualified(self):
        return "%s.%s" % (self.plural, self.group) if self.group else self.plural

    def __repr__(self):
        return "<ResourceType %s %s>" % (self.api_version, self.kind)


class Request:
    """One request the double answered (the request log)."""

    def __init__(self, method, path, query, content_type, body):
        self.method, self.path, self.query, self.content_type, self.body = method, path, query, content_type, body
        self.verb = self.kind = self.name = self.namespace = self.subresource = None
        self.user = None        # the grant()ed identity that sent it; None for the double's own token
        self.rules = None       # and its rules
        self.status = None
        self.dry_run = query.get("dryRun") == "All"
        self.changed = False

    @property
    def mutating(self):
        """A persisted write (not a dry run) that the server accepted."""
        return self.verb in _WRITE_VERBS and not self.dry_run and self.status is not None and self.status < 400

    def __repr__(self):
        return "<%s %s %s/%s%s -> %s%s%s>" % (
            self.method, self.verb, self.kind, self.name, "/" + self.subresource if self.subresource else "",
            self.status, " dryRun" if self.dry_run else "", " changed" if self.changed else "")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_text(code):
    return {200: "OK", 201: "Created", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 413: "Request Entity Too Large", 415: "Unsupported Media Type",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}.get(code, "Status")


# --------------------------------------------------------------------------- patches

def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", "invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk_pointer(doc, parts, path):
    for part in parts:
        if isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                               "path %s does not exist" % path)
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                           "path %s does not exist" % path)
    return doc


def json_patch(target, operations):
    """RFC 6902 JSON patch."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", "invalid JSON patch operation %r" % (op,))
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, "BadRequest", "JSON patch %s at %s needs a value" % (kind, path))
        if kind == "test":
            if _walk_pointer(doc, parts, path) != op["value"]:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                               "testing value %s failed" % path)
            continue
        if kind in ("move", "copy"):
            source = _walk_pointer(doc, _pointer(op["from"]), op["from"])
            value = copy.deepcopy(source)
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        if not parts:
            if kind == "remove":
                raise ApiError(422, "Invalid", "cannot remove the whole document")
            doc = copy.deepcopy(op["value"])
            continue
        parent = _walk_pointer(doc, parts[:-1], path)
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else None
            if index is None:
                try:
                    index = int(last)
                except ValueError:
                    raise ApiError(422, "Invalid", "invalid list index in %s" % path)
            bound = len(parent) if kind == "add" else len(parent) - 1
            if index < 0 or index > bound:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                               "index out of range in %s" % path)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            else:
                raise ApiError(400, "BadRequest", "unknown JSON patch operation %r" % kind)
        elif isinstance(parent, dict):
            if kind in ("remove", "replace") and last not in parent:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                               "path %s does not exist" % path)
            if kind == "remove":
                del parent[last]
            elif kind in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            else:
                raise ApiError(400, "BadRequest", "unknown JSON patch operation %r" % kind)
        else:
            raise ApiError(422, "Invalid", "path %s does not point into an object or list" % path)
    return doc


def _child_schema(node, key):
    node = k8s_validation.resolve(node)
    props = node.get("properties") or {}
    if key in props:
        return props[key]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def strategic_merge_patch(original, patch, schema):
    """Strategic merge patch of a built-in object, list strategies taken from its schema."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        child = _child_schema(schema, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            strategy = str(child.get("x-kubernetes-patch-strategy") or "")
            if "merge" in strategy.split(","):
                items = child.get("items") or {}
                result[key] = _merge_list(result.get(key) or [], value, child.get("x-kubernetes-patch-merge-key"), items)
            else:
                result[key] = [_strip_directives(v) for v in value]
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    return result


def _strip_directives(value):
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge_list(original, patch, merge_key, item_schema):
    result = [copy.deepcopy(v) for v in original]
    if not merge_key:
        for value in patch:
            if isinstance(value, dict) and value.get("$patch") == "replace":
                return []
            if value not in result:
                result.append(copy.deepcopy(value))
        return result
    for value in patch:
        if not isinstance(value, dict):
            raise ApiError(400, "BadRequest", "strategic merge patch: list items need the merge key %r" % merge_key)
        if value.get("$patch") == "replace":
            return [_strip_directives(v) for v in patch if v.get("$patch") != "replace"]
        key = value.get(merge_key)
        index = next((i for i, v in enumerate(result) if isinstance(v, dict) and v.get(merge_key) == key), None)
        if value.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_strip_directives(value))
        else:
            result[index] = strategic_merge_patch(result[index], value, item_schema)
    return result


# --------------------------------------------------------------------------- selectors

def _split_selector(text):
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


_SET_REQUIREMENT = re.compile(r"^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$")
_EQ_REQUIREMENT = re.compile(r"^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$")
_KEY = re.compile(r"^(!?)\s*([^\s!=(),]+)$")


def parse_label_selector(text):
    """A label selector string as a predicate on a labels dict (400 on syntax errors)."""
    requirements = []
    for part in _split_selector(text or ""):
        match = _SET_REQUIREMENT.match(part)
        if match:
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",") if v.strip()}
            requirements.append((key, op, values))
            continue
        match = _EQ_REQUIREMENT.match(part)
        if match:
            key, op, value = match.groups()
            requirements.append((key, "!=" if op == "!=" else "=", {value}))
            continue
        match = _KEY.match(part)
        if match:
            requirements.append((match.group(2), "!" if match.group(1) else "exists", set()))
            continue
        raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % part)

    def matches(labels):
        labels = labels or {}
        for key, op, values in requirements:
            if op == "in" and labels.get(key) not in values:
                return False
            if op == "notin" and key in labels and labels[key] in values:
                return False
            if op == "=" and labels.get(key) not in values:
                return False
            if op == "!=" and key in labels and labels[key] in values:
                return False
            if op == "exists" and key not in labels:
                return False
            if op == "!" and key in labels:
                return False
        return True
    return matches


def _field_value(obj, path):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_field_selector(text, kind):
    """A field selector string as a predicate on an object (400 for fields the real server rejects)."""
    requirements = []
    for part in _split_selector(text or ""):
        match = re.match(r"^([^!=]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not match:
            raise ApiError(400, "BadRequest", "invalid field selector: %r" % part)
        field, op, value = match.groups()
        if field not in ("metadata.name", "metadata.namespace") + _FIELD_SELECTORS.get(kind, ()):
            raise ApiError(400, "BadRequest", 'field label not supported: %s' % field)
        requirements.append((field, op != "!=", value))
    return lambda obj: all((_field_value(obj, f) == v) == eq for f, eq, v in requirements)


def _match_expression(labels, expr):
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    have = labels.get(key)
    if op == "In":
        return have in values
    if op == "NotIn":
        return have not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            return int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
    return False


def node_matches(node, pod_spec):
    """Whether the scheduler could put a pod with this spec on this node (selectors, affinity, taints)."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms:
        fields = {"metadata.name": node["metadata"]["name"]}
        if not any(all(_match_expression(labels, e) for e in t.get("matchExpressions") or [])
                   and all(_match_expression(fields, e) for e in t.get("matchFields") or []) for t in terms):
            return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") == "PreferNoSchedule":
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def _tolerates(toleration, taint):
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _quantity(value):
    text = str(value)
    suffixes = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9,
                "T": 10 ** 12, "m": 0.001}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * factor
    return float(text)


# --------------------------------------------------------------------------- defaulting

def _default_probe(probe):
    if isinstance(probe, dict):
        for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
            probe.setdefault(key, value)
        if isinstance(probe.get("httpGet"), dict):
            probe["httpGet"].setdefault("scheme", "HTTP")
            probe["httpGet"].setdefault("path", "/")


def default_pod_spec(spec, is_pod=False):
    """The API server's defaults for a PodSpec (in place)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            image = str(container.get("image") or "")
            if "imagePullPolicy" not in container:
                tag = image.rsplit("/", 1)[-1]
                pinned = "@" in image or (":" in tag and not tag.endswith(":latest"))
                container["imagePullPolicy"] = "IfNotPresent" if pinned else "Always"
            for port in container.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
            for env in container.get("env") or []:
                field_ref = ((env or {}).get("valueFrom") or {}).get("fieldRef")
                if isinstance(field_ref, dict):
                    field_ref.setdefault("apiVersion", "v1")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                _default_probe(container.get(probe))
            resources = container["resources"]
            if is_pod and isinstance(resources, dict) and resources.get("limits"):
                requests = resources.setdefault("requests", {})
                for name, amount in resources["limits"].items():
                    requests.setdefault(name, amount)
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if isinstance(volume.get("hostPath"), dict):
            volume["hostPath"].setdefault("type", "")
        for source in ("configMap", "secret", "downwardAPI", "projected"):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)


def apply_defaults(kind, obj):
    """The API server's defaults for the kinds whose defaults matter to idempotence (in place)."""
    spec = obj.get("spec")
    if kind == "Pod":
        default_pod_spec(spec, is_pod=True)
    elif kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job") and isinstance(spec, dict):
        spec.setdefault("template", {})
        default_pod_spec(spec["template"].get("spec"))
        if kind != "Job":
            spec.setdefault("revisionHistoryLimit", 10)
    elif kind == "CronJob" and isinstance(spec, dict):
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        default_pod_spec((((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec"))
    if kind == "DaemonSet" and isinstance(spec, dict):
        strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
    elif kind == "Deployment" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
    elif kind == "StatefulSet" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if strategy.get("type") == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {"partition": 0})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    elif kind == "Job" and isinstance(spec, dict):
        for key, value in (("backoffLimit", 6), ("completions", 1), ("parallelism", 1), ("completionMode", "NonIndexed"),
                           ("suspend", False), ("podReplacementPolicy", "TerminatingOrFailed"), ("manualSelector", False)):
            spec.setdefault(key, value)
        if not spec["manualSelector"]:
            spec.pop("manualSelector")
    elif kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        # the API server folds stringData into data (base64) and never stores stringData
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode("utf-8")).decode("ascii")
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"].get("name")


def _get_path(obj, dotted):
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def immutable_problems(rtype, old, new):
    """422 causes for changes to fields the API server does not let change."""
    kind, problems = rtype.kind, []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job") and old_spec.get("selector") != new_spec.get("selector"):
        problems.append(("spec.selector", "field is immutable"))
    if kind == "Job" and old_spec.get("template") != new_spec.get("template"):
        problems.append(("spec.template", "field is immutable"))
    if kind == "StatefulSet":
        mutable = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                   "minReadySeconds")
        if {k: v for k, v in old_spec.items() if k not in mutable} != {k: v for k, v in new_spec.items() if k not in mutable}:
            problems.append(("spec", "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                             "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
                             "are forbidden"))
    if kind == "Pod":
        def comparable(spec):
            spec = copy.deepcopy(spec)
            for key in ("activeDeadlineSeconds", "tolerations"):
                spec.pop(key, None)
            for group in ("containers", "initContainers"):
                for container in spec.get(group) or []:
                    container.pop("image", None)
            return spec
        if comparable(old_spec) != comparable(new_spec):
            problems.append(("spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                             "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations`"))
    if kind in ("ConfigMap", "Secret") and old.get("immutable"):
        for field in ("data", "binaryData", "stringData", "immutable"):
            if old.get(field) != new.get(field):
                problems.append((field, "Forbidden: field is immutable when `immutable` is set"))
    if kind == "Service" and old_spec.get("clusterIP") and new_spec.get("clusterIP") not in (None, old_spec["clusterIP"]):
        problems.append(("spec.clusterIP", "field is immutable"))
    if kind == "PersistentVolumeClaim":
        strip = [dict(s, resources={}) for s in (old_spec, new_spec)]
        if strip[0] != strip[1]:
            problems.append(("spec", "Forbidden: spec is immutable after creation except resources.requests"))
    for path in rtype.immutable:
        if _get_path(old, path) is not None and _get_path(old, path) != _get_path(new, path):
            problems.append((path, "field is immutable"))
    return problems


# --------------------------------------------------------------------------- the double

class K8sDouble:
    """A Kubernetes API server double on 127.0.0.1 (see the module docstring)."""

    def __init__(self, crds=ALL_CRDS, controllers=True, ready_delay=0.0, server_version=SERVER_VERSION,
                 token=None, namespaces=("default", "kube-system", "kube-public", "kube-node-lease"), tls=False):
        self.server_version = server_version
        self.tls = tls
        self.token = token or "double-token-%s" % uuid.uuid4().hex
        self.controllers = controllers
        self.ready_delay = ready_delay
        self._lock = threading.RLock()
        self._types = {}
        self._objects = {}
        self._rv = itertools.count(1000)
        self._resource_version = "1000"
        self._log = []
        self._faults = []
        self._never_ready = set()
        self._held_init = {}  # node name -> the waiting reason of the init containers of DaemonSet pods there
        self._scripts = []
        self._exec_scripts = []
        self._pod_logs = {}
        self._generation_seen = {}
        self._mig_manager = None
        self._grants = {}
        self._server = None
        self._thread = None
        self._tmpdir = None
        self.ca_file = None
        self.kubeconfig = None
        for info in k8s_validation.builtin_resources():
            self._register(ResourceType(info.group, info.version, info.kind, info.plural, info.namespaced, info.verbs,
                                        info.short_names, info.singular, info.subresources))
        custom = k8s_validation.custom_resources()
        wanted = custom.values() if crds is None else [c for c in custom.values() if c.kind in crds or c.plural in crds
                                                       or "%s.%s" % (c.plural, c.group) in crds]
        if crds is not None and len(wanted) != len(set(crds)):
            raise ValueError("unknown CRDs in %r; known: %s" % (crds, sorted(c.kind for c in custom.values())))
        for namespace in namespaces:
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for resource in wanted:
            self.install_crd(resource.kind)

    # ------------------------------------------------------------------ lifecycle
    def start(self):
        """Serve on a free port of 127.0.0.1 in a daemon thread; write the kubeconfig."""
        double = self

        class Handler(_Handler):
            owner = double

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._tmpdir = tempfile.mkdtemp(prefix="k8s-double-")
        if self.tls:
            self._serve_tls()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="k8s-double", daemon=True)
        self._thread.start()
        self.kubeconfig = self.write_kubeconfig(os.path.join(self._tmpdir, "kubeconfig"))
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _serve_tls(self):
        """Serve HTTPS with a fresh self-signed certificate for 127.0.0.1 (its own CA).

        Clients that read a kubeconfig through client-go (helm, kubectl) send the user's credentials only
        over TLS, so the double needs it for them; the python client does not care.
        """
        import ssl  # pylint: disable=import-outside-toplevel
        self.ca_file = os.path.join(self._tmpdir, "ca.crt")
        key_file = os.path.join(self._tmpdir, "server.key")
        _self_signed_certificate(self.ca_file, key_file)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, key_file)
        # the handshake happens in the handler thread, so a slow client cannot block accept()
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self._server.server_address[1])

    def write_kubeconfig(self, path, context="double", token=None):
        """Write a kubeconfig (server URL + bearer token, by default the all-powerful one) for this double; return its path."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context, "preferences": {},
            "clusters": [{"name": context, "cluster": dict(self._ca_data(), server=self.url)}],
            "users": [{"name": context, "user": {"token": token or self.token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
        }
        with open(path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle)
        os.chmod(path, 0o600)
        return path

    def _ca_data(self):
        if not self.tls:
            return {}
        with open(self.ca_file, "rb") as handle:
            return {"certificate-authority-data": base64.b64encode(handle.read()).decode("ascii")}

    def env(self):
        """Environment for an ansible-playbook subprocess (kubernetes.core reads K8S_AUTH_*)."""
        return {"K8S_AUTH_KUBECONFIG": self.kubeconfig}

    def api_client(self):
        """A kubernetes.client.ApiClient talking to this double."""
        import kubernetes.client  # pylint: disable=import-outside-toplevel
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        if self.tls:
            configuration.ssl_ca_cert = self.ca_file
        configuration.api_key = {"authorization": "Bearer " + self.token}
        return kubernetes.client.ApiClient(configuration)

    def dynamic_client(self):
        """A dynamic client with its own discovery cache: the library's default cache file is keyed by host and
        port in the shared temp folder, so a double that reuses a port would read an earlier double's discovery."""
        import kubernetes.dynamic  # pylint: disable=import-outside-toplevel
        return kubernetes.dynamic.DynamicClient(self.api_client(), cache_file=os.path.join(self._tmpdir, "discovery.json"))

    # ------------------------------------------------------------------ registry
    def _register(self, rtype):
        self._types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def _unregister(self, group, plural):
        for key in [k for k in self._types if k[0] == group and k[2] == plural]:
            del self._types[key]

    def resource_type(self, kind):
        """ResourceType for "Kind", "apiVersion/Kind" ("apps/v1/DaemonSet", "v1/Pod") or a plural."""
        with self._lock:
            api_version, _sep, name = kind.rpartition("/")
            found = [t for t in self._types.values()
                     if (t.kind == name or t.plural == name) and (not api_version or t.api_version == api_version)]
            if len(found) > 1:
                preferred = [t for t in found if t.group in ("", "apps", "batch")]
                found = preferred if len(preferred) == 1 else found
            if len(found) != 1:
                raise KeyError("%s matches %d resources: %r" % (kind, len(found), found))
            return found[0]

    def install_crd(self, kind):
        """Register one custom resource from crd_schemas (by kind or plural) and store its CRD object."""
        custom = next((c for c in k8s_validation.custom_resources().values() if kind in (c.kind, c.plural)), None)
        if custom is None:
            raise KeyError("no schema for custom resource %r in %s" % (kind, k8s_validation.CRD_SCHEMA_DIR))
        validator = k8s_validation.jsonschema.Draft202012Validator(custom.schema)
        crd_meta = custom.schema.get("x-kubernetes-crd", {})
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (custom.plural, custom.group)},
            "spec": {
                "group": custom.group, "scope": "Namespaced" if custom.namespaced else "Cluster",
                "names": {"kind": custom.kind, "listKind": custom.kind + "List", "plural": custom.plural,
                          "singular": custom.singular, **({"shortNames": list(custom.short_names)} if custom.short_names else {})},
                "versions": [{"name": custom.version, "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                              **({"subresources": {"status": {}}} if "status" in custom.subresources else {})}],
            },
        }
        with self._lock:
            self.put(crd, run_controllers=False)
            self._register(ResourceType(custom.group, custom.version, custom.kind, custom.plural, custom.namespaced,
                                        ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
                                        custom.short_names, custom.singular, custom.subresources, custom=True,
                                        validator=validator, immutable=crd_meta.get("immutable", ())))
            self._set_crd_status(self._objects[self._key(self.resource_type("CustomResourceDefinition"), None, crd["metadata"]["name"])])

    # ------------------------------------------------------------------ helpers for tests
    def _key(self, rtype, namespace, name):
        return (rtype.group, rtype.plural, namespace or "" if rtype.namespaced else "", name)

    def get(self, kind, name, namespace=None):
        """A deep copy of a stored object, or None."""
        with self._lock:
            rtype = self.resource_type(kind)
            obj = self._objects.get(self._key(rtype, namespace, name))
            return copy.deepcopy(obj)

    def list(self, kind, namespace=None):
        with self._lock:
            rtype = self.resource_type(kind)
            return [copy.deepcopy(o) for k, o in sorted(self._objects.items())
                    if k[:2] == (rtype.group, rtype.plural) and (namespace is None or k[2] == namespace)]

    def put(self, obj, run_controllers=True):
        """Store an object as-is (server metadata added), bypassing validation and the request log."""
        with self._lock:
            obj = copy.deepcopy(obj)
            rtype = self.resource_type("%s/%s" % (obj["apiVersion"], obj["kind"]))
            meta = obj.setdefault("metadata", {})
            key = self._key(rtype, meta.get("namespace"), meta["name"])
            old = self._objects.get(key)
            meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"] if old else _now())
            if not rtype.namespaced:
                meta.pop("namespace", None)
            apply_defaults(rtype.kind, obj)
            if self._tracks_generation(rtype):
                meta["generation"] = (old or {}).get("metadata", {}).get("generation", 0) + (
                    1 if old is None or self._spec_changed(old, obj) else 0)
            meta["resourceVersion"] = self._next_rv()
            self._objects[key] = obj
            if run_controllers:
                self._reconcile()
            return copy.deepcopy(obj)

    def modify(self, kind, name, change, namespace=None):
        """Apply ``change(obj)`` (in place) to a stored object, like another actor would (drift)."""
        with self._lock:
            obj = self.get(kind, name, namespace)
            if obj is None:
                raise KeyError("%s %s/%s not found" % (kind, namespace, name))
            change(obj)
            return self.put(obj)

    def remove(self, kind, name, namespace=None):
        """Delete a stored object directly (no finalizers, cascade applied)."""
        with self._lock:
            rtype = self.resource_type(kind)
            self._delete_now(rtype, self._key(rtype, namespace, name), cascade=True)
            self._reconcile()

    def set_status(self, kind, name, status, namespace=None):
        """Replace an object's status, as its controller would; a status its schema refuses (a ClusterPolicy
        state outside the CRD's enum, a condition without its required fields) raises ApiError 422."""
        with self._lock:
            rtype = self.resource_type(kind)
            obj = self._objects[self._key(rtype, namespace, name)]
            if status is not None:
                self._validate(rtype, dict(obj, status=status))
            self._write_status(obj, copy.deepcopy(status))

    def set_condition(self, kind, name, cond_type, status, reason, message="", namespace=None):
        """Set one status condition (metav1.Condition shape) on an object."""
        with self._lock:
            rtype = self.resource_type(kind)
            obj = self._objects[self._key(rtype, namespace, name)]
            new_status = copy.deepcopy(obj.get("status") or {})
            _put_condition(new_status, obj, cond_type, status, reason, message)
            self._write_status(obj, new_status)

    def add_node(self, name, labels=None, allocatable=None, capacity=None, taints=None, ready=True):
        """Add a Node (kubernetes.io/hostname, os and arch labels added; cpu/memory/pods default allocatable)."""
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        resources.update(allocatable or {})
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                       "kubernetes.io/arch": "amd64"}, **(labels or {}))},
            "spec": {"taints": list(taints)} if taints else {},
            "status": {
                "capacity": dict(resources, **(capacity or {})), "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "reason": "KubeletReady" if ready else "KubeletNotReady",
                                "message": "kubelet is posting ready status", "lastHeartbeatTime": _now(),
                                "lastTransitionTime": _now()}],
                "nodeInfo": {"kubeletVersion": "v" + self.server_version, "kubeProxyVersion": "v" + self.server_version,
                             "operatingSystem": "linux", "architecture": "amd64", "containerRuntimeVersion": "containerd://2.0.0",
                             "osImage": "Container-Optimized OS from Google", "kernelVersion": "6.6.0", "bootID": str(uuid.uuid4()),
                             "machineID": uuid.uuid4().hex, "systemUUID": str(uuid.uuid4())},
            },
        }
        return self.put(node)

    def mig_manager(self, configs=None, delay=0.0, failing=(), stuck=()):
        """Run a fake GPU Operator MIG manager on the nodes labelled ``nvidia.com/gpu.deploy.mig-manager=true``.

        Like reconfigure-mig.sh it reacts to a new ``nvidia.com/mig.config`` value: state ``pending`` at
        once, then after ``delay`` seconds ``success``, or ``failed`` for a config not in ``configs``
        (None: every name exists) or named in ``failing``; configs in ``stuck`` stay ``pending`` (a
        reboot that never comes back). Nodes without the deploy label are left alone, as the real
        DaemonSet is not scheduled there. ``mig_manager_log()`` lists what it applied, per node.
        """
        with self._lock:
            self._mig_manager = {"configs": None if configs is None else set(configs), "delay": delay,
                                 "failing": set(failing), "stuck": set(stuck), "seen": {}, "log": []}
            self._reconcile()

    def mig_manager_log(self):
        with self._lock:
            return list((self._mig_manager or {}).get("log", []))

    def never_ready(self, node_name):
        """Pods on this node never become ready (a DaemonSet covering it never gets ready)."""
        with self._lock:
            self._never_ready.add(node_name)
            self._reconcile()

    def hold_init(self, node_name, reason="CrashLoopBackOff"):
        """The first init container of DaemonSet pods on this node keeps waiting with ``reason`` (the pod is not ready),
        as a driver manager that cannot unload the old driver does; ``None`` lets them start again."""
        with self._lock:
            if reason is None:
                self._held_init.pop(node_name, None)
            else:
                self._held_init[node_name] = reason
            self._reconcile()

    def script_pod(self, match, phase="Succeeded", logs="", ready=True, delay=0.0, exit_code=None):
        """Script pods whose name (or owning Job's name) matches the regex ``match``.

        ``phase``: Running, Succeeded or Failed; ``logs``: text, or {container: text};
        ``delay``: seconds the pod stays Pending/ContainerCreating after creation.
        """
        with self._lock:
            self._scripts.append({"match": re.compile(match), "phase": phase, "logs": logs, "ready": ready,
                                  "delay": delay, "exit_code": exit_code if exit_code is not None else
                                  (0 if phase != "Failed" else 1)})
            self._reconcile()

    def set_pod_log(self, name, text, namespace="default", container=None):
        with self._lock:
            self._pod_logs[(namespace, name, container)] = text

    def script_exec(self, pod, command, stdout="", stderr="", rc=0, container=None):
        """Serve ``kubernetes.core.k8s_exec`` (websocket, v4.channel.k8s.io) for matching commands.

        ``pod`` and ``command`` are regexes searched in the pod name and in the command line (its
        arguments joined by spaces); the last matching script wins. ``stdout``/``stderr``/``rc`` may be
        callables taking (pod name, command list). Commands no script matches are refused (400).
        """
        with self._lock:
            self._exec_scripts.append({"pod": re.compile(pod), "command": re.compile(command), "stdout": stdout,
                                       "stderr": stderr, "rc": rc, "container": container})

    def handle_exec(self, raw_path, headers):
        """A websocket exec request: (ApiError, None) to refuse it, or (None, (stdout, stderr, rc))."""
        url = urlsplit(raw_path)
        multi = parse_qs(url.query, keep_blank_values=True)
        entry = Request("GET", url.path, {k: v[-1] for k, v in multi.items()}, "", " ".join(multi.get("command", [])))
        entry.verb, entry.kind, entry.subresource = "create", "Pod", "exec"
        try:
            entry.user, entry.rules = self._authenticate(headers) or (None, None)
            match = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec$", url.path)
            if not match:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            namespace, name = match.groups()
            entry.namespace, entry.name = namespace, name
            self._authorize(entry, "create", "", "pods", "exec", namespace, name)
            with self._lock:
                self._reconcile()
                self._check_fault(entry)
                pod = self._existing(self.resource_type("v1/Pod"), namespace, name)
                containers = [c["name"] for c in pod["spec"].get("containers") or []]
                container = multi.get("container", [None])[-1] or (containers[0] if len(containers) == 1 else None)
                if container not in containers:
                    raise ApiError(400, "BadRequest", "a container name must be specified for pod %s, choose one of: [%s]"
                                   % (name, " ".join(containers)))
                phase = (pod.get("status") or {}).get("phase")
                if phase != "Running":
                    raise ApiError(400, "BadRequest", "cannot exec into a container in a %s pod; current phase is %s"
                                   % ("completed" if phase in ("Succeeded", "Failed") else "pending", phase))
                command = multi.get("command", [])
                line = " ".join(command)
                script = next((x for x in reversed(self._exec_scripts) if x["pod"].search(name) and x["command"].search(line)
                               and x["container"] in (None, container)), None)
                if script is None:
                    raise ApiError(400, "BadRequest", "exec of %r in pod %s is refused: the Kubernetes API double serves "
                                   "websocket exec only for commands given to script_exec()" % (line, name))
                result = tuple(v(name, command) if callable(v) else v for v in (script["stdout"], script["stderr"], script["rc"]))
            entry.status = 101
            return None, result
        except ApiError as error:
            entry.status = error.code
            return error, None
        finally:
            with self._lock:
                self._log.append(entry)

    def reconcile(self):
        """Run the controllers once (for controllers=False)."""
        with self._lock:
            self._reconcile(force=True)

    def fail(self, verb=None, kind=None, name=None, code=500, times=1, retry_after=None, message=None):
        """Answer the next ``times`` matching requests with an error (fault injection)."""
        with self._lock:
            self._faults.append({"verb": verb, "kind": kind, "name": name, "code": code, "times": times,
                                 "retry_after": retry_after, "message": message})

    def requests(self, verb=None, kind=None, name=None):
        """The request log (copies), filtered."""
        with self._lock:
            return [r for r in self._log if (verb is None or r.verb == verb) and (kind is None or r.kind == kind)
                    and (name is None or r.name == name)]

    def writes(self, kind=None):
        """Persisted, accepted writes (create/update/patch/delete), dry runs excluded."""
        return [r for r in self.requests(kind=kind) if r.mutating]

    def clear_requests(self):
        with self._lock:
            del self._log[:]

    # ------------------------------------------------------------------ RBAC (limited identities)
    def grant(self, rules, user="system:serviceaccount:default:limited", token=None):
        """A bearer token for ``user`` that may do exactly what ``rules`` allow (a ClusterRole document or its
        ``rules``: apiGroups, resources, verbs, resourceNames, nonResourceURLs); the double's own token stays
        all-powerful. Unknown rule keys are refused (ValueError), as the API server refuses them."""
        if isinstance(rules, dict):
            if rules.get("kind") not in ("ClusterRole", "Role"):
                raise ValueError("grant() takes a ClusterRole document or a list of rules, not %r" % rules.get("kind"))
            rules = rules.get("rules") or []
        known = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")
        for rule in rules:
            unknown = sorted(set(rule) - set(known))
            if unknown or not rule.get("verbs"):
                raise ValueError("rule %r: unknown keys %s or no verbs" % (rule, unknown))
        token = token or "double-rbac-%s" % uuid.uuid4().hex
        with self._lock:
            self._grants[token] = (user, copy.deepcopy(list(rules)))
        return token

    def _authenticate(self, headers):
        """None for the double's own token, (user, rules) of a grant()ed one; 401 otherwise."""
        auth = headers.get("Authorization") or ""
        if auth == "Bearer " + self.token:
            return None
        grant = self._grants.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
        if grant is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return grant

    def _authorize(self, entry, verb, group, resource, sub, namespace, name):
        """403 unless a rule of the request's identity allows it (evaluation_helpers.go's matching)."""
        if entry.user is None:
            return
        combined = resource + ("/" + sub if sub else "")
        for rule in entry.rules:
            if rule.get("nonResourceURLs"):
                continue
            verbs, groups, resources = rule.get("verbs") or [], rule.get("apiGroups") or [], rule.get("resources") or []
            names = rule.get("resourceNames") or []
            if ("*" in verbs or verb in verbs) and ("*" in groups or group in groups) \
                    and any(r in ("*", combined) or (sub and r == "*/" + sub) for r in resources) \
                    and (not names or name in names):
                return
        where = 'in the namespace "%s"' % namespace if namespace else "at the cluster scope"
        reason = 'User "%s" cannot %s resource "%s" in API group "%s" %s' % (entry.user, verb, combined, group, where)
        qualified = resource + ("." + group if group else "")
        details = dict((k, v) for k, v in (("name", name), ("group", group), ("kind", resource)) if v)
        raise ApiError(403, "Forbidden", "%s%s is forbidden: %s" % (qualified, ' "%s"' % name if name else "", reason),
                       details=details)

    # the non-resource URLs every authenticated user may get (bootstrap ClusterRoles system:discovery and
    # system:public-info-viewer, bound to system:authenticated)
    _DISCOVERY_URLS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/",
                       "/healthz", "/livez", "/readyz")

    def _authorize_path(self, entry, verb, path):
        if entry.user is None:
            return
        allowed = [dict(verbs=["get"], nonResourceURLs=list(self._DISCOVERY_URLS))] + \
            [r for r in entry.rules if r.get("nonResourceURLs")]
        for rule in allowed:
            if ("*" in rule["verbs"] or verb in rule["verbs"]) and any(
                    u in ("*", path) or (u.endswith("*") and path.startswith(u.rstrip("*"))) for u in rule["nonResourceURLs"]):
                return
        raise ApiError(403, "Forbidden", 'forbidden: User "%s" cannot %s path "%s"' % (entry.user, verb, path), details={})

    # ------------------------------------------------------------------ HTTP entry point
    def handle(self, method, raw_path, headers, raw_body):
        """Answer one HTTP request: (status, headers, body bytes)."""
        url = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        content_type = (headers.get("Content-Type") or "").split(";")[0].strip()
        entry = Request(method, url.path, query, content_type, raw_body.decode("utf-8", "replace") if raw_body else None)
        extra = {}
        try:
            entry.user, entry.rules = self._authenticate(headers) or (None, None)
            with self._lock:
                self._reconcile()
                status, payload = self._dispatch(method, url.path, query, content_type, raw_body, entry)
        except ApiError as error:
            status, payload, extra = error.code, error.body(), error.headers
        except Exception as error:  # pylint: disable=broad-exception-caught
            status = 500
            payload = ApiError(500, "InternalError", "API double bug: %r\n%s" % (error, traceback.format_exc())).body()
        entry.status = status
        with self._lock:
            self._log.append(entry)
        if isinstance(payload, str):
            return status, dict(extra, **{"Content-Type": "text/plain"}), payload.encode("utf-8")
        return status, dict(extra, **{"Content-Type": "application/json"}), json.dumps(payload).encode("utf-8")

    def _check_fault(self, entry):
        for fault in self._faults:
            if fault["times"] <= 0:
                continue
            if fault["verb"] not in (None, entry.verb) or fault["kind"] not in (None, entry.kind) \
                    or fault["name"] not in (None, entry.name):
                continue
            fault["times"] -= 1
            headers = {"Retry-After": str(fault["retry_after"])} if fault["retry_after"] is not None else {}
            reason = {429: "TooManyRequests", 409: "Conflict", 503: "ServiceUnavailable", 504: "Timeout",
                      404: "NotFound", 403: "Forbidden"}.get(fault["code"], "InternalError")
            raise ApiError(fault["code"], reason, fault["message"] or "injected fault (%s)" % reason, headers=headers)

    # ------------------------------------------------------------------ routing
    def _dispatch(self, method, path, query, content_type, raw_body, entry):
        parts = [p for p in path.split("/") if p]
        if method == "GET":
            discovery = self._discovery(parts)
            if discovery is not None:
                entry.verb = "discovery"
                self._authorize_path(entry, "get", path)
                return 200, discovery
        if parts and parts[0] in ("healthz", "livez", "readyz"):
            self._authorize_path(entry, {"GET": "get", "HEAD": "head"}.get(method, method.lower()), path)
            return 200, "ok"
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            self._authorize_path(entry, method.lower(), path)   # a non-resource URL: authorized before it is routed
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and (group, version, rest[2]) in self._types:
            namespace, rest = rest[1], rest[2:]
        if not rest or (group, version, rest[0]) not in self._types or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rtype = self._types[(group, version, rest[0])]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        entry.kind, entry.name, entry.namespace, entry.subresource = rtype.kind, name, namespace, sub
        if rtype.namespaced and namespace is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rtype.namespaced and namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        verb = {"GET": "list" if name is None else "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "deletecollection" if name is None else "delete"}.get(method)
        entry.verb = verb
        if verb is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        self._authorize(entry, verb, group, rtype.plural, sub, namespace, name)
        if sub is not None and sub not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        allowed = _SUBRESOURCE_VERBS.get(sub, ()) if sub else rtype.verbs
        if verb not in allowed and not (verb == "list" and sub is None and "list" in rtype.verbs):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if name is None and method == "POST" and rtype.namespaced and namespace is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        dry_run = query.get("dryRun")
        if dry_run not in (None, "All"):
            raise ApiError(400, "BadRequest", "Invalid dry run value %r: only 'All' is supported" % dry_run)
        if query.get("watch") in ("true", "1", "True"):
            raise ApiError(400, "BadRequest", "watch is not supported by the Kubernetes API double (poll instead)")
        if sub in _UPGRADE_SUBRESOURCES:
            raise ApiError(400, "BadRequest", "%s needs a websocket/SPDY upgrade, which the Kubernetes API double does "
                           "not support" % sub)
        self._check_fault(entry)
        body = self._parse_body(method, content_type, raw_body, rtype, sub)
        dry = dry_run == "All"
        if sub not in (None, "status", "log", "scale", "eviction"):
            raise ApiError(404, "NotFound", "the %s subresource is not implemented by the Kubernetes API double" % sub)
        if sub == "scale":
            return self._scale(rtype, namespace, name, verb, body, content_type, dry, entry)
        if sub == "eviction":
            return self._evict(rtype, namespace, name, body, dry, entry)
        if verb == "list":
            return 200, self._list(rtype, namespace, query)
        if verb == "get":
            if sub == "log":
                return 200, self._pod_log(namespace, name, query)
            return 200, copy.deepcopy(self._existing(rtype, namespace, name))
        if verb == "create":
            return self._create(rtype, namespace, body, dry, entry)
        if verb == "update":
            return self._replace(rtype, namespace, name, body, sub, dry, entry)
        if verb == "patch":
            return self._patch(rtype, namespace, name, body, content_type, sub, dry, entry)
        if verb == "delete":
            return self._delete(rtype, namespace, name, body, query, dry, entry)
        return self._delete_collection(rtype, namespace, query, dry, entry)

    def _parse_body(self, method, content_type, raw, rtype, sub):
        if content_type == k8s_protobuf.CONTENT_TYPE and method in ("POST", "PUT", "DELETE") and raw:
            return self._parse_protobuf(method, raw, rtype)
        if method not in ("POST", "PUT", "PATCH"):
            if method == "DELETE" and raw:
                try:
                    return json.loads(raw)
                except ValueError:
                    raise ApiError(400, "BadRequest", "invalid DeleteOptions body")
            return None
        if method == "PATCH":
            if content_type == "application/apply-patch+yaml":
                raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by the Kubernetes API double")
            if content_type == "application/strategic-merge-patch+json" and rtype.custom:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")
            if content_type not in ("application/json-patch+json", "application/merge-patch+json",
                                    "application/strategic-merge-patch+json"):
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               "accepted media types include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml, application/strategic-merge-patch+json")
        elif content_type not in ("application/json", ""):
            raise ApiError(415, "UnsupportedMediaType", "the Kubernetes API double only accepts application/json, got %r"
                           % content_type)
        try:
            body = json.loads(raw or b"null")
        except ValueError as error:
            raise ApiError(400, "BadRequest", "error decoding request body: %s" % error)
        if method != "PATCH" and not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body must be a JSON object")
        return body

    @staticmethod
    def _parse_protobuf(method, raw, rtype):
        """A protobuf body (client-go typed clients: helm's release Secrets and their DeleteOptions)."""
        try:
            body = k8s_protobuf.decode(raw)
        except k8s_protobuf.ProtobufError as error:
            raise ApiError(415 if "decodes protobuf only" in str(error) else 400,
                           "UnsupportedMediaType" if "decodes protobuf only" in str(error) else "BadRequest",
                           "protobuf body: %s" % error)
        if method == "DELETE" and body["kind"] != "DeleteOptions":
            raise ApiError(400, "BadRequest", "a DELETE body must be DeleteOptions, got %s" % body["kind"])
        if method != "DELETE" and (body["kind"], body["apiVersion"]) != (rtype.kind, rtype.api_version):
            raise ApiError(400, "BadRequest", "the API version in the data (%s) and kind (%s) do not match the "
                           "expected %s %s" % (body["apiVersion"], body["kind"], rtype.api_version, rtype.kind))
        return body

    # ------------------------------------------------------------------ discovery
    def _discovery(self, parts):
        if parts == ["version"]:
            major, minor = self.server_version.split(".")[:2]
            return {"major": major, "minor": minor, "gitVersion": "v%s-double" % self.server_version,
                    "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi_v3("/".join(parts[2:]))
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1")
        groups = collections.OrderedDict()
        for (group, version, _plural) in self._types:
            if group:
                groups.setdefault(group, [])
                if version not in groups[group]:
                    groups[group].append(version)
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g, v) for g, v in groups.items()]}
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in groups:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return dict(self._group(parts[1], groups[parts[1]]), kind="APIGroup", apiVersion="v1")
        if len(parts) == 3 and parts[0] == "apis":
            if parts[2] not in groups.get(parts[1], []):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._resource_list(parts[1], parts[2])
        if parts and parts[0] == "openapi":
            raise ApiError(404, "NotFound", "OpenAPI documents are not served by the Kubernetes API double")
        return None

    @staticmethod
    def _group(group, versions):
        return {"name": group, "versions": [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in versions],
                "preferredVersion": {"groupVersion": "%s/%s" % (group, versions[0]), "version": versions[0]}}

    def _resource_list(self, group, version):
        resources = []
        for (g, v, _p), rtype in self._types.items():
            if (g, v) != (group, version):
                continue
            resources.append({"name": rtype.plural, "singularName": rtype.singular, "namespaced": rtype.namespaced,
                              "kind": rtype.kind, "verbs": list(rtype.verbs), "shortNames": list(rtype.short_names)})
            for sub in sorted(rtype.subresources):
                resources.append({"name": "%s/%s" % (rtype.plural, sub), "singularName": "", "namespaced": rtype.namespaced,
                                  "kind": rtype.kind, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])})
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (group, version) if group else version,
                "resources": resources}

    def _group_versions(self):
        """{"api/v1" or "apis/<group>/<version>": [ResourceType...]} of what is served now."""
        served = collections.OrderedDict()
        for (group, version, _plural), rtype in self._types.items():
            served.setdefault("apis/%s/%s" % (group, version) if group else "api/" + version, []).append(rtype)
        return served

    def _openapi_v3(self, group_version):
        """OpenAPI v3: the index, and per group-version the paths with their operations and parameters.

        Clients (kubectl, helm) read it to learn that the server validates fields itself (the
        ``fieldValidation`` parameter of each PATCH) and then skip their own schema check; the
        documents carry no ``components.schemas`` (the double validates on write, strictly).
        """
        served = self._group_versions()
        if not group_version:
            return {"paths": {gv: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (gv, self._openapi_hash(gv, types))}
                              for gv, types in served.items()}}
        if group_version not in served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        paths = {}
        for rtype in served[group_version]:
            paths.update(_openapi_paths(group_version, rtype))
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v" + self.server_version},
                "paths": paths, "components": {"schemas": {}}}

    @staticmethod
    def _openapi_hash(group_version, types):
        text = group_version + ",".join(sorted("%s:%s" % (t.plural, t.kind) for t in types))
        return hashlib.sha512(text.encode("utf-8")).hexdigest().upper()[:128]

    # ------------------------------------------------------------------ verbs
    def _existing(self, rtype, namespace, name):
        obj = self._objects.get(self._key(rtype, namespace, name))
        if obj is None:
            raise self._not_found(rtype, name)
        return obj

    @staticmethod
    def _not_found(rtype, name):
        return ApiError(404, "NotFound", '%s "%s" not found' % (rtype.qualified, name),
                        {"name": name, "group": rtype.group, "kind": rtype.plural})

    def _list(self, rtype, namespace, query):
        label_match = parse_label_selector(query.get("labelSelector"))
        field_match = parse_field_selector(query.get("fieldSelector"), rtype.kind)
        items = []
        for key, obj in sorted(self._objects.items()):
            if key[:2] != (rtype.group, rtype.plural) or (namespace is not None and key[2] != namespace):
                continue
            if not label_match(obj["metadata"].get("labels")) or not field_match(obj):
                continue
            item = copy.deepcopy(obj)
            if not rtype.custom:
                item.pop("apiVersion", None)
                item.pop("kind", None)
            items.append(item)
        return {"kind": rtype.kind + "List", "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": self._resource_version}, "items": items}

    def _check_type(self, rtype, body):
        if body.get("kind") != rtype.kind or body.get("apiVersion") != rtype.api_version:
            raise ApiError(400, "BadRequest", "the API version in the data (%s) and kind (%s) do not match the expected "
                           "%s %s" % (body.get("apiVersion"), body.get("kind"), rtype.api_version, rtype.kind))
        if not isinstance(body.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")

    def _invalid(self, rtype, name, causes):
        message = '%s "%s" is invalid: %s' % (rtype.kind, name, "; ".join("%s: %s" % c for c in causes))
        raise ApiError(422, "Invalid", message, {"name": name, "group": rtype.group, "kind": rtype.kind,
                                                 "causes": [{"field": f, "message": m, "reason": "FieldValueInvalid"}
                                                            for f, m in causes]})

    def _validate(self, rtype, obj):
        name = obj["metadata"].get("name")
        if rtype.validator is not None:
            problems = k8s_validation._schema_problems(rtype.validator, obj)  # pylint: disable=protected-access
            problems += k8s_validation._metadata_problems(obj, rtype.namespaced)  # pylint: disable=protected-access
            problems = ["x: " + p for p in problems]
        elif rtype.custom:
            problems = []
        else:
            if k8s_validation.builtin_schema(rtype.api_version, rtype.kind, self.server_version) is None:
                raise ApiError(405, "MethodNotAllowed", "the Kubernetes API double has no schema for %s %s and does not "
                               "store it" % (rtype.api_version, rtype.kind))
            problems = k8s_validation.problems(obj, versions=(self.server_version,))
        if problems:
            causes = []
            for problem in problems:
                _label, _sep, rest = problem.partition(": ")
                field, _sep, message = rest.partition(": ")
                causes.append((field, message or field))
            self._invalid(rtype, name, causes)

    def _tracks_generation(self, rtype):
        return rtype.custom or rtype.kind in _GENERATION_KINDS

    @staticmethod
    def _spec_changed(old, new):
        def strip(obj):
            return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
        return strip(old) != strip(new)

    def _next_rv(self):
        self._resource_version = str(next(self._rv))
        return self._resource_version

    def _create(self, rtype, namespace, body, dry_run, entry):
        obj = copy.deepcopy(body)
        self._check_type(rtype, obj)
        meta = obj.setdefault("metadata", {})
        if rtype.namespaced:
            if meta.get("namespace") not in (None, namespace):
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                               "sent on the request")
            meta["namespace"] = namespace
            if self._objects.get(self._key(self.resource_type("v1/Namespace"), None, namespace)) is None:
                raise ApiError(404, "NotFound", 'namespaces "%s" not found' % namespace,
                               {"name": namespace, "kind": "namespaces"})
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                self._invalid(rtype, "", [("metadata.name", "Required value: name or generateName is required")])
            while True:
                meta["name"] = meta["generateName"] + "".join(random.choice(_NAME_CHARS) for _i in range(5))
                if self._key(rtype, namespace, meta["name"]) not in self._objects:
                    break
        entry.name = meta["name"]
        key = self._key(rtype, namespace, meta["name"])
        if key in self._objects:
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rtype.qualified, meta["name"]),
                           {"name": meta["name"], "group": rtype.group, "kind": rtype.plural})
        for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "managedFields", "selfLink"):
            meta.pop(field, None)
        if "status" in rtype.subresources:
            obj.pop("status", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        apply_defaults(rtype.kind, obj)
        if rtype.kind == "Job":
            self._default_job_selector(obj)
        if rtype.kind == "Service":
            self._allocate_cluster_ip(obj)
        self._validate(rtype, obj)
        if self._tracks_generation(rtype):
            meta["generation"] = 1
        if dry_run:
            return 201, obj
        meta["resourceVersion"] = self._next_rv()
        self._objects[key] = obj
        entry.changed = True
        if rtype.kind == "CustomResourceDefinition":
            self._register_crd(obj)
        answer = copy.deepcopy(obj)
        self._reconcile()
        return 201, answer

    def _replace(self, rtype, namespace, name, body, sub, dry_run, entry):
        old = self._existing(rtype, namespace, name)
        new = copy.deepcopy(body)
        self._check_type(rtype, new)
        meta = new.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)"
                           % (meta.get("name"), name))
        if rtype.namespaced and meta.get("namespace") not in (None, namespace):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent "
                           "on the request")
        sent_rv = meta.get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise self._conflict(rtype, name)
        if not sent_rv and rtype.custom:
            self._invalid(rtype, name, [("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")])
        return self._store_update(rtype, old, new, sub, dry_run, entry)

    @staticmethod
    def _conflict(rtype, name):
        return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been modified; please '
                        'apply your changes to the latest version and try again' % (rtype.qualified, name),
                        {"name": name, "group": rtype.group, "kind": rtype.plural})

    def _patch(self, rtype, namespace, name, body, content_type, sub, dry_run, entry):
        old = self._existing(rtype, namespace, name)
        if content_type == "application/json-patch+json":
            new = json_patch(old, body)
        elif content_type == "application/merge-patch+json":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            new = merge_patch(old, body)
        else:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "a strategic merge patch must be a JSON object")
            schema = k8s_validation.builtin_schema(rtype.api_version, rtype.kind, self.server_version, strict=False) or {}
            new = strategic_merge_patch(old, body, schema)
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patch did not produce an object")
        sent_rv = ((body if isinstance(body, dict) else {}).get("metadata") or {}).get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise self._conflict(rtype, name)
        new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        self._check_type(rtype, new)
        return self._store_update(rtype, old, new, sub, dry_run, entry)

    def _store_update(self, rtype, old, new, sub, dry_run, entry):
        meta = new["metadata"]
        name = old["metadata"]["name"]
        if sub == "status":
            result = copy.deepcopy(old)
            if new.get("status") is None:
                result.pop("status", None)
            else:
                result["status"] = new["status"]
        else:
            result = new
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                          "name", "namespace"):
                if field in old["metadata"]:
                    meta[field] = old["metadata"][field]
                else:
                    meta.pop(field, None)
            if "status" in rtype.subresources:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            apply_defaults(rtype.kind, result)
            problems = immutable_problems(rtype, old, result)
            if problems:
                self._invalid(rtype, name, problems)
            if old["metadata"].get("deletionTimestamp") and len(result["metadata"].get("finalizers") or []) > \
                    len(old["metadata"].get("finalizers") or []):
                self._invalid(rtype, name, [("metadata.finalizers", "Forbidden: no new finalizers can be added if the "
                                             "object is being deleted")])
        if rtype.kind == "Service":
            self._allocate_cluster_ip(result, old)
        self._validate(rtype, result)
        result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if result == old:
            return 200, copy.deepcopy(old)
        if self._tracks_generation(rtype) and self._spec_changed(old, result):
            result["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        if dry_run:
            return 200, result
        result["metadata"]["resourceVersion"] = self._next_rv()
        key = self._key(rtype, old["metadata"].get("namespace"), name)
        self._objects[key] = result
        entry.changed = True
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            self._delete_now(rtype, key, cascade=True)
        if rtype.kind == "CustomResourceDefinition":
            self._register_crd(result)
        answer = copy.deepcopy(result)
        self._reconcile()
        return 200, answer

    def _delete(self, rtype, namespace, name, options, query, dry_run, entry):
        obj = self._existing(rtype, namespace, name)
        options = options or {}
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") not in (None, obj["metadata"]["uid"]):
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (preconditions["uid"], obj["metadata"]["uid"]))
        if preconditions.get("resourceVersion") not in (None, obj["metadata"]["resourceVersion"]):
            raise self._conflict(rtype, name)
        policy = options.get("propagationPolicy") or query.get("propagationPolicy")
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError(400, "BadRequest", "unsupported propagationPolicy %r" % policy)
        key = self._key(rtype, namespace, name)
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                  "details": {"name": name, "group": rtype.group, "kind": rtype.plural, "uid": obj["metadata"]["uid"]}}
        if obj["metadata"].get("finalizers"):
            result = copy.deepcopy(obj)
            if not result["metadata"].get("deletionTimestamp"):
                result["metadata"]["deletionTimestamp"] = _now()
                result["metadata"]["deletionGracePeriodSeconds"] = 0
                if not dry_run:
                    result["metadata"]["resourceVersion"] = self._next_rv()
                    self._objects[key] = result
                    entry.changed = True
            return 202 if not dry_run else 200, copy.deepcopy(result)
        if dry_run:
            return 200, copy.deepcopy(obj) if rtype.custom else status
        self._delete_now(rtype, key, cascade=policy != "Orphan")
        entry.changed = True
        self._reconcile()
        return 200, copy.deepcopy(obj) if rtype.custom else status

    def _scale_object(self, obj):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        labels = ((spec.get("selector") or {}).get("matchLabels") or {})
        meta = obj["metadata"]
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta},
                "spec": {"replicas": spec.get("replicas", 1)},
                "status": {"replicas": status.get("replicas", 0), "selector": ",".join("%s=%s" % kv for kv in sorted(labels.items()))}}

    def _scale(self, rtype, namespace, name, verb, body, content_type, dry_run, entry):
        """The scale subresource (autoscaling/v1 Scale) of deployments, statefulsets and replicasets."""
        obj = self._existing(rtype, namespace, name)
        scale = self._scale_object(obj)
        if verb == "get":
            return 200, scale
        if verb == "patch":
            if content_type == "application/json-patch+json":
                scale = json_patch(scale, body)
            elif isinstance(body, dict):
                scale = merge_patch(scale, body)
        elif isinstance(body, dict):
            scale = body
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            self._invalid(rtype, name, [("spec.replicas", "Invalid value: %r: must be greater than or equal to 0" % (replicas,))])
        new = copy.deepcopy(obj)
        new["spec"]["replicas"] = replicas
        _status, result = self._store_update(rtype, obj, new, None, dry_run, entry)
        return 200, self._scale_object(result)

    def _evict(self, rtype, namespace, name, body, dry_run, entry):
        """pods/<name>/eviction: deletes the pod (PodDisruptionBudgets are not evaluated)."""
        if rtype.kind != "Pod" or not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
            raise ApiError(400, "BadRequest", "an eviction needs a policy/v1 Eviction body")
        self._delete(rtype, namespace, name, body.get("deleteOptions"), {}, dry_run, entry)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _delete_collection(self, rtype, namespace, query, dry_run, entry):
        listing = self._list(rtype, namespace, query)
        deleted = []
        for item in listing["items"]:
            meta = item["metadata"]
            self._delete(rtype, meta.get("namespace"), meta["name"], None, query, dry_run, entry)
            deleted.append(dict(item, apiVersion=rtype.api_version, kind=rtype.kind))
        listing["items"] = deleted
        return 200, listing

    def _delete_now(self, rtype, key, cascade):
        obj = self._objects.pop(key, None)
        if obj is None:
            return
        self._next_rv()
        if rtype.kind == "Namespace":
            for other in [k for k in self._objects if k[2] == obj["metadata"]["name"]]:
                self._objects.pop(other, None)
        if rtype.kind == "CustomResourceDefinition":
            spec = obj.get("spec") or {}
            plural = (spec.get("names") or {}).get("plural")
            self._unregister(spec.get("group"), plural)
            for other in [k for k in self._objects if k[0] == spec.get("group") and k[1] == plural]:
                self._objects.pop(other, None)
        if cascade:
            self._collect_garbage()

    def _collect_garbage(self):
        while True:
            uids = {o["metadata"]["uid"] for o in self._objects.values()}
            orphans = [k for k, o in self._objects.items()
                       if o["metadata"].get("ownerReferences")
                       and not any(r.get("uid") in uids for r in o["metadata"]["ownerReferences"])]
            if not orphans:
                return
            for key in orphans:
                self._objects.pop(key, None)

    def _pod_log(self, namespace, name, query):
        pod = self._existing(self.resource_type("v1/Pod"), namespace, name)
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        container = query.get("container")
        if container is None:
            if len(containers) != 1:
                raise ApiError(400, "BadRequest", "a container name must be specified for pod %s, choose one of: [%s]"
                               % (name, " ".join(containers)))
            container = containers[0]
        elif container not in containers + [c["name"] for c in pod["spec"].get("initContainers") or []]:
            raise ApiError(400, "BadRequest", "container %s is not valid for pod %s" % (container, name))
        # an init container that has run (restarted: CrashLoopBackOff) has a log while its pod is still Pending
        has_run = any(s.get("name") == container and s.get("restartCount") for s in (pod.get("status") or {}).get("initContainerStatuses") or [])
        if (pod.get("status") or {}).get("phase") in (None, "Pending") and not has_run:
            raise ApiError(400, "BadRequest", 'container "%s" in pod "%s" is waiting to start: ContainerCreating'
                           % (container, name))
        text = self._pod_logs.get((namespace, name, container), self._pod_logs.get((namespace, name, None), ""))
        tail = query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(True)
            text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
        return text

    # ------------------------------------------------------------------ server-side helpers
    @staticmethod
    def _default_job_selector(job):
        spec = job.setdefault("spec", {})
        if spec.get("manualSelector"):
            return
        uid = job["metadata"]["uid"]
        name = job["metadata"]["name"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                  "controller-uid": uid, "job-name": name}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        template_meta.setdefault("labels", {}).update(labels)

    def _allocate_cluster_ip(self, service, old=None):
        spec = service.setdefault("spec", {})
        if spec.get("clusterIP") == "None":
            spec["clusterIPs"] = ["None"]
            return
        if not spec.get("clusterIP"):
            spec["clusterIP"] = ((old or {}).get("spec") or {}).get("clusterIP") or \
                "10.96.%d.%d" % divmod(len(self._objects) % 65000 + 10, 256)
        spec["clusterIPs"] = [spec["clusterIP"]]

    def _register_crd(self, crd):
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if not version.get("served"):
                continue
            schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or {"type": "object"}
            validator = k8s_validation.jsonschema.Draft202012Validator(k8s_validation.openapi_to_jsonschema(schema))
            self._register(ResourceType(
                spec.get("group"), version["name"], names.get("kind"), names.get("plural"), spec.get("scope") != "Cluster",
                ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
                names.get("shortNames") or (), names.get("singular"), ("status",) if (version.get("subresources") or {})
                .get("status") is not None else (), custom=True, validator=validator))
        self._set_crd_status(crd)

    def _set_crd_status(self, crd):
        status = {"acceptedNames": copy.deepcopy((crd.get("spec") or {}).get("names") or {}),
                  "storedVersions": [v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("storage")]}
        # a CustomResourceDefinitionCondition has no observedGeneration (apiextensions.k8s.io/v1)
        for cond_type, reason in (("NamesAccepted", "NoConflicts"), ("Established", "InitialNamesAccepted")):
            _put_condition(status, crd, cond_type, "True", reason, "the initial names have been accepted", observed=False)
        crd["status"] = status

    def _write_status(self, obj, status):
        if status is None:
            obj.pop("status", None)
        else:
            obj["status"] = status
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._reconcile()

    # ------------------------------------------------------------------ controllers
    def _reconcile(self, force=False):
        if not (self.controllers or force):
            return
        for _round in range(5):
            before = self._resource_version
            self._reconcile_namespaces()
            self._reconcile_daemonsets()
            self._reconcile_jobs()
            self._reconcile_pods()
            self._reconcile_deployments()
            self._reconcile_gke_networking()
            self._reconcile_mig_manager()
            if self._resource_version == before:
                return

    def _objects_of(self, group, plural):
        return [(k, o) for k, o in sorted(self._objects.items()) if k[0] == group and k[1] == plural]

    def _set_status_if_changed(self, obj, status):
        if obj.get("status") != status:
            obj["status"] = status
            obj["metadata"]["resourceVersion"] = self._next_rv()

    def _nodes(self):
        return [o for _k, o in self._objects_of("", "nodes")]

    def _node_ready(self, node):
        if node["metadata"]["name"] in self._never_ready:
            return False
        conditions = (node.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _settled(self, obj):
        """Whether ready_delay has passed since this generation of the object was first seen."""
        key = obj["metadata"]["uid"]
        generation = obj["metadata"].get("generation", 0)
        seen = self._generation_seen.get(key)
        if seen is None or seen[0] != generation:
            seen = (generation, time.monotonic())
            self._generation_seen[key] = seen
        return time.monotonic() - seen[1] >= self.ready_delay

    def _reconcile_namespaces(self):
        for _key, namespace in self._objects_of("", "namespaces"):
            if (namespace.get("status") or {}).get("phase") != "Active":
                self._set_status_if_changed(namespace, {"phase": "Active"})

    def _owned_pods(self, owner):
        uid = owner["metadata"]["uid"]
        return [(k, o) for k, o in self._objects_of("", "pods")
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def _new_pod(self, owner, template, name, node_name=None, extra_labels=None):
        meta = template.get("metadata") or {}
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": owner["metadata"]["namespace"],
                         "labels": dict(meta.get("labels") or {}, **(extra_labels or {})),
                         "annotations": dict(meta.get("annotations") or {}),
                         "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                         "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": copy.deepcopy(template.get("spec") or {}),
            "status": {"phase": "Pending"},
        }
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        if node_name:
            pod["spec"]["nodeName"] = node_name
        default_pod_spec(pod["spec"], is_pod=True)
        pod["metadata"]["resourceVersion"] = self._next_rv()
        self._objects[("", "pods", pod["metadata"]["namespace"], name)] = pod
        return pod

    def _reconcile_daemonsets(self):
        for _key, ds in self._objects_of("apps", "daemonsets"):
            if ds["metadata"].get("deletionTimestamp"):
                continue
            template = (ds.get("spec") or {}).get("template") or {}
            pod_spec = template.get("spec") or {}
            eligible = [n for n in self._nodes() if node_matches(n, pod_spec)]
            eligible_names = {n["metadata"]["name"] for n in eligible}
            generation = str(ds["metadata"].get("generation", 1))
            pods = {}
            for pod_key, pod in self._owned_pods(ds):
                node = pod["spec"].get("nodeName")
                # OnDelete: a pod of an older template stays until it is deleted (the GPU Operator's driver upgrade)
                stale = ((pod["metadata"].get("labels") or {}).get("pod-template-generation") != generation
                         and ((ds.get("spec") or {}).get("updateStrategy") or {}).get("type") != "OnDelete")
                if node not in eligible_names or stale or node in pods:
                    self._objects.pop(pod_key, None)
                    self._next_rv()
                else:
                    pods[node] = pod
            settled = self._settled(ds)
            ready = 0
            for node in eligible:
                node_name = node["metadata"]["name"]
                pod = pods.get(node_name)
                if pod is None:
                    rng = random.Random(node_name + ds["metadata"]["uid"])
                    suffix = "".join(rng.choice(_NAME_CHARS) for _i in range(5))
                    pod = self._new_pod(ds, template, "%s-%s" % (ds["metadata"]["name"], suffix), node_name,
                                        {"pod-template-generation": generation, "controller-revision-hash": generation})
                held = self._held_init.get(node_name) if pod["spec"].get("initContainers") else None
                is_ready = settled and self._node_ready(node) and not held
                ready += 1 if is_ready else 0
                self._set_status_if_changed(pod, _pod_status(pod, "Pending" if held else "Running", is_ready, held_init=held))
            desired = len(eligible)
            status = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired, "numberMisscheduled": 0,
                      "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": desired,
                      "observedGeneration": ds["metadata"].get("generation", 1)}
            if desired - ready:
                status["numberUnavailable"] = desired - ready
            if not ready:
                del status["numberAvailable"]
            self._set_status_if_changed(ds, status)

    def _schedulable_node(self, pod_spec, exclude_pod=None):
        for node in self._nodes():
            if not node_matches(node, pod_spec) or (node.get("spec") or {}).get("unschedulable"):
                continue
            if self._fits(node, pod_spec, exclude_pod):
                return node
        return None

    def _fits(self, node, pod_spec, exclude_pod):
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        wanted = _extended_requests(pod_spec)
        if not wanted:
            return True
        used = collections.Counter()
        for _key, other in self._objects_of("", "pods"):
            if other is exclude_pod or other["spec"].get("nodeName") != node["metadata"]["name"]:
                continue
            if (other.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            used.update(_extended_requests(other["spec"]))
        return all(_quantity(allocatable.get(name, 0)) - used[name] >= amount for name, amount in wanted.items())

    def _script_for(self, pod):
        names = [pod["metadata"]["name"]] + [r.get("name") for r in pod["metadata"].get("ownerReferences") or []]
        for script in reversed(self._scripts):
            if any(script["match"].search(n or "") for n in names):
                return script
        return None

    def _reconcile_pods(self):
        for _key, pod in self._objects_of("", "pods"):
            if pod["metadata"].get("ownerReferences") and any(
                    r.get("kind") == "DaemonSet" for r in pod["metadata"]["ownerReferences"]):
                continue
            status = pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            spec = pod["spec"]
            if not spec.get("nodeName"):
                node = self._schedulable_node(spec, exclude_pod=pod)
                if node is None:
                    self._set_status_if_changed(pod, {"phase": "Pending", "conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/%d nodes are available" % len(self._nodes()), "lastProbeTime": None,
                        "lastTransitionTime": pod["metadata"]["creationTimestamp"]}]})
                    continue
                spec["nodeName"] = node["metadata"]["name"]
                pod["metadata"]["resourceVersion"] = self._next_rv()
            script = self._script_for(pod)
            default_phase = "Running" if spec.get("restartPolicy", "Always") == "Always" else "Succeeded"
            phase = script["phase"] if script else default_phase
            delay = script["delay"] if script else 0.0
            started = self._generation_seen.setdefault(pod["metadata"]["uid"], (0, time.monotonic()))[1]
            if time.monotonic() - started < delay:
                self._set_status_if_changed(pod, _pod_status(pod, "Pending", False))
                continue
            node = next((n for n in self._nodes() if n["metadata"]["name"] == spec["nodeName"]), None)
            node_ok = node is not None and self._node_ready(node)
            if script and script["logs"] is not None:
                logs = script["logs"] if isinstance(script["logs"], dict) else {None: script["logs"]}
                for container, text in logs.items():
                    self._pod_logs.setdefault((pod["metadata"]["namespace"], pod["metadata"]["name"], container), text)
            ready = phase == "Running" and node_ok and (script["ready"] if script else True)
            self._set_status_if_changed(pod, _pod_status(pod, phase, ready, script["exit_code"] if script else 0))

    def _reconcile_jobs(self):
        for _key, job in self._objects_of("batch", "jobs"):
            spec = job.get("spec") or {}
            if spec.get("suspend") or job["metadata"].get("deletionTimestamp"):
                continue
            pods = self._owned_pods(job)
            if not pods:
                rng = random.Random(job["metadata"]["uid"])
                suffix = "".join(rng.choice(_NAME_CHARS) for _i in range(5))
                self._new_pod(job, spec.get("template") or {}, "%s-%s" % (job["metadata"]["name"], suffix))
                self._reconcile_pods()
                pods = self._owned_pods(job)
            phases = [(p.get("status") or {}).get("phase") for _k, p in pods]
            status = copy.deepcopy(job.get("status") or {})
            status.setdefault("startTime", job["metadata"]["creationTimestamp"])
            if "Succeeded" in phases:
                status.update({"succeeded": 1, "ready": 0})
                status.pop("active", None)
                status.setdefault("completionTime", _now())
                _put_condition(status, job, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                _put_condition(status, job, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
            elif "Failed" in phases:
                status.update({"failed": 1, "ready": 0})
                status.pop("active", None)
                _put_condition(status, job, "FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
                _put_condition(status, job, "Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            else:
                running = [p for _k, p in pods if (p.get("status") or {}).get("phase") == "Running"]
                status.update({"active": len(pods), "ready": len([p for p in running if _pod_is_ready(p)])})
            for condition in status.get("conditions") or []:
                condition.pop("observedGeneration", None)
            self._set_status_if_changed(job, status)

    def _reconcile_deployments(self):
        for group, plural in (("apps", "deployments"), ("apps", "statefulsets")):
            for _key, obj in self._objects_of(group, plural):
                spec = obj.get("spec") or {}
                replicas = spec.get("replicas", 1)
                pod_spec = (spec.get("template") or {}).get("spec") or {}
                runnable = any(node_matches(n, pod_spec) and self._node_ready(n) for n in self._nodes())
                ready = replicas if runnable and self._settled(obj) else 0
                generation = obj["metadata"].get("generation", 1)
                if plural == "deployments":
                    status = {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
                              "readyReplicas": ready, "availableReplicas": ready}
                    if replicas - ready:
                        status["unavailableReplicas"] = replicas - ready
                    conditions = copy.deepcopy((obj.get("status") or {}).get("conditions") or [])
                    status["conditions"] = conditions
                    _put_condition(status, obj, "Available", "True" if ready == replicas else "False",
                                   "MinimumReplicasAvailable" if ready == replicas else "MinimumReplicasUnavailable",
                                   "Deployment has %s availability." % ("minimum" if ready == replicas else "no minimum"),
                                   observed=False)
                    for key in [k for k in status if status[k] == 0 and k != "observedGeneration"]:
                        del status[key]
                    self._replicaset_of(obj, replicas, ready)
                else:
                    revision = "%s-%s" % (obj["metadata"]["name"], generation)
                    status = {"observedGeneration": generation, "replicas": replicas, "readyReplicas": ready,
                              "currentReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": ready,
                              "currentRevision": revision, "updateRevision": revision, "collisionCount": 0}
                self._set_status_if_changed(obj, status)

    def _replicaset_of(self, deployment, replicas, ready):
        """The Deployment's ReplicaSet for its current pod template (``<name>-<pod-template-hash>``, controlled by
        it), which ``helm --wait`` looks up; the ReplicaSets of earlier templates are scaled to 0, as the
        deployment controller leaves them after a rollout. No pods: readiness is the Deployment's."""
        meta = deployment["metadata"]
        template = copy.deepcopy((deployment.get("spec") or {}).get("template") or {})
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode("utf-8")).digest()
        pod_hash = "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in digest[:10])
        name = "%s-%s" % (meta["name"], pod_hash)
        for _key, old in self._objects_of("apps", "replicasets"):
            owned = any(r.get("uid") == meta["uid"] and r.get("controller") for r in old["metadata"].get("ownerReferences") or [])
            if owned and old["metadata"]["name"] != name and old["spec"].get("replicas"):
                old["spec"]["replicas"] = 0
                old["status"] = {"replicas": 0, "observedGeneration": old["metadata"]["generation"]}
                old["metadata"]["resourceVersion"] = self._next_rv()
        key = ("apps", "replicasets", meta["namespace"], name)
        replicaset = self._objects.get(key)
        if replicaset is None:
            labels = dict((template.get("metadata") or {}).get("labels") or {}, **{"pod-template-hash": pod_hash})
            template.setdefault("metadata", {})["labels"] = labels
            selector = copy.deepcopy(deployment["spec"].get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
            replicaset = {
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "uid": str(uuid.uuid4()),
                             "creationTimestamp": _now(), "generation": 1,
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                                  "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
                "spec": {"replicas": replicas, "selector": selector, "template": template}}
            replicaset["metadata"]["resourceVersion"] = self._next_rv()
            self._objects[key] = replicaset
        elif replicaset["spec"].get("replicas") != replicas:
            replicaset["spec"]["replicas"] = replicas
            replicaset["metadata"]["generation"] += 1
            replicaset["metadata"]["resourceVersion"] = self._next_rv()
        status = {"replicas": replicas, "fullyLabeledReplicas": replicas, "readyReplicas": ready,
                  "availableReplicas": ready, "observedGeneration": replicaset["metadata"]["generation"]}
        self._set_status_if_changed(replicaset, {k: v for k, v in status.items() if v or k == "replicas"})

    def _reconcile_mig_manager(self):
        manager = self._mig_manager
        if manager is None:
            return
        for node in self._nodes():
            labels = node["metadata"].setdefault("labels", {})
            name, config = node["metadata"]["name"], labels.get("nvidia.com/mig.config")
            if labels.get("nvidia.com/gpu.deploy.mig-manager") != "true" or config is None:
                continue
            seen = manager["seen"].get(name)
            if seen is None and labels.get("nvidia.com/mig.config.state") == "success":
                seen = manager["seen"][name] = (config, time.monotonic(), True)  # applied before it started
            if seen is None or seen[0] != config:
                seen = manager["seen"][name] = (config, time.monotonic(), False)
                self._set_node_label(node, "nvidia.com/mig.config.state", "pending")
            if seen[2] or config in manager["stuck"] or time.monotonic() - seen[1] < manager["delay"]:
                continue
            known = manager["configs"] is None or config in manager["configs"]
            outcome = "success" if known and config not in manager["failing"] else "failed"
            manager["seen"][name] = (config, seen[1], True)
            manager["log"].append((name, config, outcome))
            self._set_node_label(node, "nvidia.com/mig.config.state", outcome)

    def _set_node_label(self, node, key, value):
        if node["metadata"]["labels"].get(key) != value:
            node["metadata"]["labels"][key] = value
            node["metadata"]["resourceVersion"] = self._next_rv()

    def _reconcile_gke_networking(self):
        if ("networking.gke.io", "v1", "networks") not in self._types:
            return
        params = dict(self._objects_of("networking.gke.io", "gkenetworkparamsets"))
        networks = dict(self._objects_of("networking.gke.io", "networks"))
        referenced = {}
        for _key, network in sorted(networks.items()):
            ref = (network.get("spec") or {}).get("parametersRef") or {}
            if ref.get("kind") == "GKENetworkParamSet":
                referenced.setdefault(ref.get("name"), network["metadata"]["name"])
        seen_vpcs, seen_subnets = {}, {}
        for key, gnp in sorted(params.items(), key=lambda kv: (kv[1]["metadata"]["creationTimestamp"], kv[0])):
            if not self._settled(gnp):
                continue
            spec = gnp.get("spec") or {}
            name = gnp["metadata"]["name"]
            reason, message = "GNPReady", "GKENetworkParamSet resource was validated successfully"
            if spec.get("networkAttachment") and any(spec.get(f) for f in ("vpc", "vpcSubnet", "deviceMode", "podIPv4Ranges")):
                reason, message = "GNPConfigInvalid", "networkAttachment is mutually exclusive with vpc, vpcSubnet, deviceMode and podIPv4Ranges"
            elif spec.get("networkAttachment"):
                pass
            elif not spec.get("vpc") or not spec.get("vpcSubnet"):
                reason, message = "GNPConfigInvalid", "vpc and vpcSubnet are required without networkAttachment"
            elif not spec.get("deviceMode") and not spec.get("podIPv4Ranges"):
                reason, message = "SecondaryRangeAndDeviceModeUnspecified", "either deviceMode or podIPv4Ranges must be set"
            elif spec.get("deviceMode") and spec.get("podIPv4Ranges"):
                reason, message = "DeviceModeCantBeUsedWithSecondaryRange", "deviceMode cannot be used with podIPv4Ranges"
            elif spec.get("deviceMode") and spec["vpc"].rsplit("/", 1)[-1] == "default":
                reason, message = "DeviceModeCantUseDefaultVPC", "a device mode GKENetworkParamSet cannot use the default VPC"
            # RDMA: one RoCE VPC serves every RDMA NIC, one subnet (and GKENetworkParamSet) each (GKE's custom
            # RDMA guide: rdma-0..N-1 name the same vpc); the one-VPC-per-set rule holds for the other device modes
            elif spec.get("deviceMode") not in (None, "RDMA") and seen_vpcs.get(spec["vpc"], name) != name:
                reason, message = "DeviceModeVPCAlreadyInUse", "VPC %s is already used by %s" % (spec["vpc"], seen_vpcs[spec["vpc"]])
            elif spec.get("deviceMode") and seen_subnets.get(spec["vpcSubnet"], name) != name:
                reason, message = "DeviceModeSubnetAlreadyInUse", "subnet %s is already used by %s" % (
                    spec["vpcSubnet"], seen_subnets[spec["vpcSubnet"]])
            if reason == "GNPReady" and spec.get("deviceMode"):
                if spec["deviceMode"] != "RDMA":
                    seen_vpcs.setdefault(spec["vpc"], name)
                seen_subnets.setdefault(spec["vpcSubnet"], name)
            status = copy.deepcopy(gnp.get("status") or {})
            _put_condition(status, gnp, "Ready", "True" if reason == "GNPReady" else "False", reason, message)
            if name in referenced:
                status["networkName"] = referenced[name]
            else:
                status.pop("networkName", None)
            self._set_status_if_changed(gnp, status)
        for _key, network in sorted(networks.items()):
            if not self._settled(network):
                continue
            spec = network.get("spec") or {}
            ref = spec.get("parametersRef")
            status = copy.deepcopy(network.get("status") or {})
            if ref:
                gnp = params.get(("networking.gke.io", "gkenetworkparamsets", "", ref.get("name")))
                gnp_ready = gnp is not None and _condition(gnp, "Ready") == "True"
                gnp_spec = (gnp or {}).get("spec") or {}
                if gnp is None:
                    params_reason, params_ok = "GNPDeleted", False
                elif not gnp_ready:
                    params_reason, params_ok = "GNPParamsNotReady", False
                elif spec.get("type") == "Device" and not gnp_spec.get("deviceMode"):
                    params_reason, params_ok = "DeviceModeMissing", False
                elif spec.get("type") == "L3" and not gnp_spec.get("podIPv4Ranges"):
                    params_reason, params_ok = "L3SecondaryMissing", False
                else:
                    params_reason, params_ok = "GNPParamsReady", True
                _put_condition(status, network, "ParamsReady", "True" if params_ok else "False", params_reason,
                               "GKENetworkParamSet %s: %s" % (ref.get("name"), params_reason))
                ready = params_ok
            else:
                ready = spec.get("type") != "Device"
            _put_condition(status, network, "Ready", "True" if ready else "False",
                           "NetworkReady" if ready else "ParamsNotReady",
                           "Network is ready" if ready else "the parameters of the network are not ready")
            self._set_status_if_changed(network, status)


def _condition(obj, cond_type):
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == cond_type:
            return condition.get("status")
    return None


def _put_condition(status, obj, cond_type, value, reason, message, observed=True):
    conditions = status.setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == cond_type), None)
    condition = {"type": cond_type, "status": value, "reason": reason, "message": message,
                 "lastTransitionTime": existing["lastTransitionTime"] if existing and existing.get("status") == value
                 and existing.get("lastTransitionTime") else _now()}
    if observed and obj["metadata"].get("generation") is not None:
        condition["observedGeneration"] = obj["metadata"]["generation"]
    if existing is None:
        conditions.append(condition)
    else:
        existing.clear()
        existing.update(condition)


def _extended_requests(pod_spec):
    total = collections.Counter()
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        for name, amount in dict(resources.get("limits") or {}, **(resources.get("requests") or {})).items():
            if "/" in name:
                total[name] += _quantity(amount)
    return total


def _pod_is_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _pod_status(pod, phase, ready, exit_code=0, held_init=None):
    """A kubelet-like pod status; ``held_init``: the first init container waits with this reason."""
    started = pod["metadata"]["creationTimestamp"]
    statuses = []
    init_statuses = []
    for index, container in enumerate(pod["spec"].get("initContainers") or []):
        if held_init:
            state = {"waiting": {"reason": held_init}} if index == 0 else {"waiting": {"reason": "PodInitializing"}}
        elif phase in ("Running", "Succeeded", "Failed"):
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}}
        else:
            state = {"waiting": {"reason": "PodInitializing"}}
        init_statuses.append({"name": container["name"], "image": container.get("image"), "imageID": "", "ready": "terminated" in state,
                              "restartCount": 3 if held_init and index == 0 else 0, "started": False, "state": state})
    for container in pod["spec"].get("containers") or []:
        if phase == "Running":
            state = {"running": {"startedAt": started}}
        elif phase in ("Succeeded", "Failed"):
            state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if phase == "Succeeded" else "Error",
                                    "startedAt": started, "finishedAt": started}}
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        statuses.append({"name": container["name"], "image": container.get("image"), "imageID": "",
                         "ready": bool(ready and phase == "Running"), "restartCount": 0, "started": phase == "Running",
                         "state": state})
    scheduled = bool(pod["spec"].get("nodeName"))
    conditions = [{"type": "PodScheduled", "status": "True" if scheduled else "False", "lastTransitionTime": started}]
    if phase != "Pending":
        conditions.append({"type": "Initialized", "status": "True", "lastTransitionTime": started})
    conditions.append({"type": "ContainersReady", "status": "True" if ready and phase == "Running" else "False",
                       "lastTransitionTime": started})
    conditions.append({"type": "Ready", "status": "True" if ready and phase == "Running" else "False",
                       "lastTransitionTime": started})
    status = {"phase": phase, "conditions": conditions, "containerStatuses": statuses, "qosClass": "BestEffort"}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if scheduled:
        status.update({"hostIP": "10.0.0.1", "podIP": "10.64.0.%d" % (sum(map(ord, pod["metadata"]["name"])) % 250 + 2),
                       "startTime": started})
    return status


_OPENAPI_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")


def _openapi_operation(action, rtype, parameters=()):
    gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    return {"operationId": "%s%s" % (action, rtype.kind), "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [{"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
                           for name in parameters],
            "responses": {"200": {"description": "OK"}}}


def _openapi_paths(group_version, rtype):
    """The collection and item paths of one resource, with the verbs discovery lists for it."""
    base = "/" + group_version + ("/namespaces/{namespace}" if rtype.namespaced else "") + "/" + rtype.plural
    collection, item = {}, {}
    verbs = set(rtype.verbs)
    if "list" in verbs:
        collection["get"] = _openapi_operation("list", rtype, ("labelSelector", "fieldSelector"))
    if "create" in verbs:
        collection["post"] = _openapi_operation("post", rtype, _OPENAPI_WRITE_PARAMETERS)
    if "deletecollection" in verbs:
        collection["delete"] = _openapi_operation("deletecollection", rtype, ("dryRun", "labelSelector"))
    if "get" in verbs:
        item["get"] = _openapi_operation("get", rtype)
    if "update" in verbs:
        item["put"] = _openapi_operation("put", rtype, _OPENAPI_WRITE_PARAMETERS)
    if "patch" in verbs:
        item["patch"] = _openapi_operation("patch", rtype, _OPENAPI_WRITE_PARAMETERS + ("force",))
    if "delete" in verbs:
        item["delete"] = _openapi_operation("delete", rtype, ("dryRun", "propagationPolicy"))
    return {path: ops for path, ops in ((base, collection), (base + "/{name}", item)) if ops}


def _self_signed_certificate(cert_file, key_file):
    """Write a self-signed CA certificate valid for 127.0.0.1 and localhost, and its key."""
    # cryptography comes with azure-identity (msal); only TLS doubles need it
    from cryptography import x509  # pylint: disable=import-outside-toplevel
    from cryptography.hazmat.primitives import hashes, serialization  # pylint: disable=import-outside-toplevel
    from cryptography.hazmat.primitives.asymmetric import ec  # pylint: disable=import-outside-toplevel
    from cryptography.x509.oid import NameOID  # pylint: disable=import-outside-toplevel
    import ipaddress  # pylint: disable=import-outside-toplevel

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k8s-double")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    with open(cert_file, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(key_file, 0o600)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that gives up on the TLS handshake (an unknown CA) is its own business; anything else is printed."""
        import ssl  # pylint: disable=import-outside-toplevel
        if not isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner = None
    timeout = 120  # idle keep-alive connections are closed after this many seconds

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if (self.headers.get("Upgrade") or "").lower() == "websocket" and "/exec" in self.path:
            error, result = self.owner.handle_exec(self.path, self.headers)
            if error is None:
                self._websocket_exec(*result)
                return
            status, headers, payload = error.code, dict(error.headers, **{"Content-Type": "application/json"}), \
                json.dumps(error.body()).encode("utf-8")
        else:
            status, headers, payload = self.owner.handle(self.command, self.path, self.headers, body)
        self.send_response(status, _status_text(status))
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        if self.headers.get("Upgrade"):
            # a refused protocol upgrade (websocket/SPDY exec) ends the connection, as the API server does
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def _frame(self, opcode, payload):
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x80 | opcode, size)
        elif size < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 126, size)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 127, size)
        self.wfile.write(header + payload)

    def _websocket_exec(self, stdout, stderr, rc):
        """Answer a websocket exec with the v4.channel.k8s.io protocol: stdout, stderr, status, close."""
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        for channel, text in ((1, stdout), (2, stderr)):
            if text:
                self._frame(0x2, bytes([channel]) + text.encode("utf-8"))
        if rc == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                      "message": "command terminated with non-zero exit code: exit status %d" % rc,
                      "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}
        self._frame(0x2, bytes([3]) + json.dumps(status).encode("utf-8"))
        self._frame(0x8, struct.pack("!H", 1000))
        self.wfile.flush()
        # wait (briefly) for the client's close frame, then end the connection
        try:
            self.connection.settimeout(2)
            self.connection.recv(1024)
        except (OSError, socket.timeout):
            pass
        self.close_connection = True

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        return
