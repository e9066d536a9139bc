# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate Kubernetes manifests the way an API server would, without a cluster.

Used by contract tests, by the render-mode tests (every written manifest) and by the Kubernetes API
double (every object it is asked to store)::

    from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation

    k8s_validation.problems(manifest)          # -> list of "Kind/name: path: problem" strings
    k8s_validation.validate(manifest)          # raises ManifestError listing every problem
    k8s_validation.validate_path("rendered/manifests")   # a YAML file or a folder; returns the count

Built-in kinds are checked with kubernetes-validate in **strict** mode (unknown fields are errors),
against two Kubernetes versions: ``KUBERNETES_VERSION`` (1.33, the oldest minor the collection
supports: CNS 16.2 pins 1.33 and it is the oldest GKE/AKS minor still in standard support when this
was written) and ``NEWEST_KUBERNETES_VERSION`` (the newest schema kubernetes-validate ships). A field
that only exists in a newer minor therefore fails (an older cluster would drop it silently), and so
does an API that a newer minor removed.

Custom resources are checked with jsonschema against ``crd_schemas/<plural>.<group>.json``. Those
files are JSON Schema (draft 2020-12) written from the fields the published CRDs declare;
``additionalProperties: false`` stands where the CRD is structural (the API server would silently
prune an unknown field there, which hides typos; we reject it instead). Each file carries the CRD's
identity under ``x-kubernetes-crd`` (group, version, kind, plural, scope, subresources), which the
API double uses to register the resource.

On top of the schemas, the checks the API server's validation does and a schema cannot express:
object names (DNS-1123 subdomain / label / path segment), label keys and values, the 256 KiB
annotation limit (it bites ``kubectl.kubernetes.io/last-applied-configuration``), the 1 MiB ConfigMap
limit, workload selectors that must match the pod template labels, unique container names, volume
mounts that name a declared volume, restartPolicy per workload kind, extended resources (such as
``nvidia.com/gpu``) whose request must equal their limit, and ``metadata.namespace`` on a
cluster-scoped kind.

An unknown kind (neither built in nor described in ``crd_schemas``) is always a problem: nothing
passes unchecked.
"""

from __future__ import annotations

import collections
import functools
import gzip
import importlib.resources
import json
import os
import re

import jsonschema
import referencing
import yaml
from kubernetes_validate import utils as kv_utils

KUBERNETES_VERSION = "1.33.0"
NEWEST_KUBERNETES_VERSION = kv_utils.latest_version()
VERSIONS = (KUBERNETES_VERSION, NEWEST_KUBERNETES_VERSION)
CRD_SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crd_schemas")

# API groups in kmock's bundled discovery data that are not built into a plain cluster
_NOT_BUILT_IN = ("gateway.networking.k8s.io", "metrics.k8s.io")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# kinds whose names only have to be valid path segments (RBAC names such as "system:foo")
_PATH_SEGMENT_NAMED = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
_LABEL_NAMED = ("Namespace", "Service")
_ANNOTATIONS_LIMIT = 256 * 1024
_CONFIGMAP_LIMIT = 1024 * 1024
_WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet")

ResourceInfo = collections.namedtuple(
    "ResourceInfo", "group version kind plural singular namespaced verbs short_names subresources")
CustomResource = collections.namedtuple(
    "CustomResource", "group version kind plural singular namespaced short_names subresources schema path")


class ManifestError(AssertionError):
    """One or more manifests are not valid; ``problems`` lists every problem found."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("invalid Kubernetes manifest(s):\n  " + "\n  ".join(self.problems))


# --------------------------------------------------------------------------- built-in kinds

@functools.lru_cache(maxsize=None)
def builtin_resources():
    """The built-in resources of a current cluster, from kmock's bundled discovery data (k3s)."""
    raw = importlib.resources.files("kmock._internal").joinpath("resources.json.gz").read_bytes()
    result = []
    for group_version in json.loads(gzip.decompress(raw)):
        gv = group_version["groupVersion"]
        group, _sep, version = gv.rpartition("/")
        if group in _NOT_BUILT_IN:
            continue
        subresources = collections.defaultdict(set)
        for res in group_version["resources"]:
            if "/" in res["name"]:
                parent, sub = res["name"].split("/", 1)
                subresources[parent].add(sub)
        for res in group_version["resources"]:
            if "/" in res["name"]:
                continue
            result.append(ResourceInfo(
                group=group, version=version, kind=res["kind"], plural=res["name"],
                singular=res.get("singularName") or res["kind"].lower(), namespaced=bool(res["namespaced"]),
                verbs=tuple(res.get("verbs") or ()), short_names=tuple(res.get("shortNames") or ()),
                subresources=frozenset(subresources[res["name"]])))
    # GA kinds newer than that discovery data (k3s without resource.k8s.io/v1): DRA, GA in Kubernetes 1.34; their
    # schemas come from kubernetes-validate (so they validate on 1.34+ only, which is right: 1.33 does not serve them)
    known = set((r.group, r.version, r.kind) for r in result)
    for info in _NEWER_BUILTINS:
        if (info.group, info.version, info.kind) not in known:
            result.append(info)
    return tuple(result)


_DRA_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# resource.k8s.io/v1 as a 1.34+ API server serves it (kubernetes pkg/registry/resource: DeviceClass and ResourceSlice
# cluster-scoped, ResourceClaim with a status subresource)
_NEWER_BUILTINS = (
    ResourceInfo(group="resource.k8s.io", version="v1", kind="ResourceClaimTemplate", plural="resourceclaimtemplates",
                 singular="resourceclaimtemplate", namespaced=True, verbs=_DRA_VERBS,
                 short_names=(), subresources=frozenset()),
    ResourceInfo(group="resource.k8s.io", version="v1", kind="ResourceClaim", plural="resourceclaims",
                 singular="resourceclaim", namespaced=True, verbs=_DRA_VERBS,
                 short_names=(), subresources=frozenset(("status",))),
    ResourceInfo(group="resource.k8s.io", version="v1", kind="DeviceClass", plural="deviceclasses",
                 singular="deviceclass", namespaced=False, verbs=_DRA_VERBS,
                 short_names=(), subresources=frozenset()),
    ResourceInfo(group="resource.k8s.io", version="v1", kind="ResourceSlice", plural="resourceslices",
                 singular="resourceslice", namespaced=False, verbs=_DRA_VERBS,
                 short_names=(), subresources=frozenset()),
)


def builtin_kind(api_version, kind):
    """ResourceInfo of a built-in kind, or None."""
    for info in builtin_resources():
        if _api_version(info.group, info.version) == api_version and info.kind == kind:
            return info
    return None


def _api_version(group, version):
    return "%s/%s" % (group, version) if group else version


def _schema_dir(version, strict):
    version = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= kv_utils.major_minor(version)][-1]
    return "v%s-local%s" % (version, "-strict" if strict else "")


def _schema_file(api_version, kind):
    return "%s-%s.json" % (kind.lower(), re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version))


@functools.lru_cache(maxsize=None)
def _definitions(version, strict):
    return kv_utils.schema_contents("kubernetes-json-schema/%s/_definitions.json" % _schema_dir(version, strict), version)


@functools.lru_cache(maxsize=None)
def builtin_schema(api_version, kind, version=KUBERNETES_VERSION, strict=True):
    """kubernetes-validate's JSON schema of a built-in kind, or None when it has none."""
    path = "kubernetes-json-schema/%s/%s" % (_schema_dir(version, strict), _schema_file(api_version, kind))
    try:
        return kv_utils.schema_contents(path, version)
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=None)
def _builtin_validator(api_version, kind, version):
    schema = builtin_schema(api_version, kind, version, strict=True)
    if schema is None:
        return None
    registry = referencing.Resource.from_contents(schema) @ referencing.Registry()
    registry = referencing.Resource.from_contents(_definitions(version, True)) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def resolve(node, version=KUBERNETES_VERSION):
    """Follow ``$ref`` in a built-in schema node (used by the API double for strategic merge patch)."""
    while isinstance(node, dict) and "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = _definitions(version, False)["$defs"].get(name)
    return node if isinstance(node, dict) else {}


# --------------------------------------------------------------------------- custom resources

@functools.lru_cache(maxsize=None)
def custom_resources():
    """{(group, kind): CustomResource} for every schema in crd_schemas/."""
    result = {}
    for name in sorted(os.listdir(CRD_SCHEMA_DIR)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(CRD_SCHEMA_DIR, name)
        with open(path, encoding="utf-8") as handle:
            schema = json.load(handle)
        crd = schema["x-kubernetes-crd"]
        jsonschema.Draft202012Validator.check_schema(schema)
        result[(crd["group"], crd["kind"])] = CustomResource(
            group=crd["group"], version=crd["version"], kind=crd["kind"], plural=crd["plural"],
            singular=crd.get("singular", crd["kind"].lower()), namespaced=crd["scope"] == "Namespaced",
            short_names=tuple(crd.get("shortNames", ())), subresources=frozenset(crd.get("subresources", ())),
            schema=schema, path=path)
    return result


def custom_resource(api_version, kind):
    """CustomResource for apiVersion/kind, or None."""
    group, _sep, version = api_version.rpartition("/")
    found = custom_resources().get((group, kind))
    if found is not None and found.version == version:
        return found
    return None


@functools.lru_cache(maxsize=None)
def _custom_validator(api_version, kind):
    return jsonschema.Draft202012Validator(custom_resource(api_version, kind).schema)


def openapi_to_jsonschema(node, root=True):
    """A CRD's structural ``openAPIV3Schema`` as strict JSON Schema (for CRDs created at run time).

    Objects with ``properties`` and neither ``additionalProperties`` nor
    ``x-kubernetes-preserve-unknown-fields`` reject unknown fields (the API server would prune them).
    """
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: ({"type": "object"} if root and k == "metadata" else openapi_to_jsonschema(v, False))
                        for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value, False)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [openapi_to_jsonschema(v, False) for v in value]
        elif key in ("description", "example", "externalDocs", "default") or key.startswith("x-kubernetes-"):
            continue
        elif key == "nullable":
            continue
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields") and not node.get("x-kubernetes-embedded-resource"):
        out["additionalProperties"] = False
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if root:
        # every object carries apiVersion, kind and metadata, declared or not
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    return out


# --------------------------------------------------------------------------- checks

def _label_problems(labels, where):
    problems = []
    if labels is None:
        return problems
    if not isinstance(labels, dict):
        return ["%s: must be a map of strings" % where]
    for key, value in labels.items():
        problems.extend(_qualified_name_problems(key, where))
        if not isinstance(value, str):
            problems.append("%s.%s: value must be a string, got %r" % (where, key, value))
        elif len(value) > 63 or (value and not _QUALIFIED_NAME.match(value)):
            problems.append("%s.%s: invalid label value %r (at most 63 characters, alphanumerics, '-', '_' or '.', "
                            "starting and ending with an alphanumeric)" % (where, key, value))
    return problems


def _qualified_name_problems(key, where):
    prefix, _sep, name = key.rpartition("/")
    problems = []
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        problems.append("%s: key %r has an invalid prefix (must be a DNS-1123 subdomain)" % (where, key))
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        problems.append("%s: invalid key %r (name part: at most 63 characters, alphanumerics, '-', '_' or '.')"
                        % (where, key))
    return problems


def _name_problems(kind, name):
    if not isinstance(name, str) or not name:
        return ["metadata.name: required (or metadata.generateName)"]
    if kind in _PATH_SEGMENT_NAMED:
        if name in (".", "..") or "/" in name or "%" in name:
            return ["metadata.name: %r may not be '.', '..' or contain '/' or '%%'" % name]
        return []
    if kind in _LABEL_NAMED:
        if len(name) > 63 or not _LABEL.match(name):
            return ["metadata.name: %r is not a DNS-1123 label (lower case alphanumerics and '-', at most 63)" % name]
        return []
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return ["metadata.name: %r is not a DNS-1123 subdomain (lower case alphanumerics, '-' and '.', at most 253)"
                % name]
    return []


def _metadata_problems(doc, namespaced):
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: required"]
    problems = []
    if meta.get("name") or not meta.get("generateName"):
        problems.extend(_name_problems(doc.get("kind"), meta.get("name")))
    problems.extend(_label_problems(meta.get("labels"), "metadata.labels"))
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > _ANNOTATIONS_LIMIT:
            problems.append("metadata.annotations: too long: must have at most %d bytes (has %d)" % (_ANNOTATIONS_LIMIT, size))
        for key in annotations:
            problems.extend(_qualified_name_problems(key, "metadata.annotations"))
    namespace = meta.get("namespace")
    if namespace is not None:
        if not namespaced:
            problems.append("metadata.namespace: %s is cluster-scoped and must not set a namespace" % doc.get("kind"))
        elif not isinstance(namespace, str) or len(namespace) > 63 or not _LABEL.match(namespace):
            problems.append("metadata.namespace: %r is not a DNS-1123 label" % (namespace,))
    return problems


def _selector_matches(selector, labels):
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _extended(resource_name):
    return "/" in resource_name and not resource_name.split("/", 1)[0].endswith("kubernetes.io")


def _pod_spec_problems(spec, where, restart_policies):
    problems = []
    if not isinstance(spec, dict):
        return problems
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict)}
    if len(volumes) != len(spec.get("volumes") or []):
        problems.append("%s.volumes: names must be unique" % where)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in restart_policies:
        problems.append("%s.restartPolicy: unsupported value %r, supported values: %s"
                        % (where, policy, ", ".join(restart_policies)))
    elif policy is None and "Always" not in restart_policies:
        problems.append("%s.restartPolicy: required, supported values: %s" % (where, ", ".join(restart_policies)))
    names = []
    for group in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(group) or []):
            if not isinstance(container, dict):
                continue
            path = "%s.%s[%d]" % (where, group, index)
            name = container.get("name")
            names.append(name)
            if isinstance(name, str) and (len(name) > 63 or not _LABEL.match(name)):
                problems.append("%s.name: %r is not a DNS-1123 label" % (path, name))
            for mount in container.get("volumeMounts") or []:
                if isinstance(mount, dict) and mount.get("name") not in volumes:
                    problems.append("%s.volumeMounts: volume %r is not declared in %s.volumes" % (path, mount.get("name"), where))
            resources = container.get("resources") or {}
            limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
            for resource_name, amount in requests.items():
                if _extended(resource_name) and str(limits.get(resource_name)) != str(amount):
                    problems.append("%s.resources.requests[%s]: must be equal to the %s limit (extended resources cannot "
                                    "be overcommitted)" % (path, resource_name, resource_name))
    if not spec.get("containers"):
        problems.append("%s.containers: at least one container is required" % where)
    if len(set(names)) != len(names):
        problems.append("%s: container names must be unique across containers and initContainers" % where)
    return problems


def _semantic_problems(doc):
    kind, spec = doc.get("kind"), doc.get("spec")
    if not isinstance(spec, dict):
        return []
    problems = []
    if kind in _WORKLOADS:
        selector = spec.get("selector")
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        problems.extend(_label_problems(labels, "spec.template.metadata.labels"))
        if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
            problems.append("spec.selector: required (apps/v1 has no default selector)")
        else:
            problems.extend(_label_problems(selector.get("matchLabels"), "spec.selector.matchLabels"))
            if not _selector_matches(selector, labels):
                problems.append("spec.template.metadata.labels: `selector` does not match template `labels`")
        problems.extend(_pod_spec_problems(template.get("spec"), "spec.template.spec", ("Always",)))
    elif kind == "Job":
        problems.extend(_pod_spec_problems((spec.get("template") or {}).get("spec"), "spec.template.spec",
                                           ("OnFailure", "Never")))
    elif kind == "CronJob":
        job = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
        problems.extend(_pod_spec_problems(job.get("spec"), "spec.jobTemplate.spec.template.spec", ("OnFailure", "Never")))
    elif kind == "Pod":
        problems.extend(_pod_spec_problems(spec, "spec", ("Always", "OnFailure", "Never")))
    return problems


def _configmap_problems(doc):
    problems = []
    size = 0
    for field in ("data", "binaryData"):
        for key, value in (doc.get(field) or {}).items():
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                problems.append("%s[%s]: a valid config key must consist of alphanumerics, '-', '_' or '.'" % (field, key))
            size += len(key) + len(str(value))
    if size > _CONFIGMAP_LIMIT:
        problems.append("data: too long: must have at most %d bytes" % _CONFIGMAP_LIMIT)
    return problems


def _schema_problems(validator, doc):
    problems = []
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in error.absolute_path) or "<root>"
        problems.append("%s: %s" % (path, error.message))
    return problems


def problems(doc, versions=VERSIONS):
    """Every problem of one manifest (a dict), as "Kind/name: path: message" strings; [] when valid."""
    if not isinstance(doc, dict):
        return ["<document>: a manifest must be a mapping, got %s" % type(doc).__name__]
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    label = "%s/%s" % (kind, (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None)
    if not isinstance(kind, str) or not isinstance(api_version, str) or not kind or not api_version:
        return ["%s: apiVersion and kind are required strings" % label]
    if api_version == "v1" and kind == "List":
        found = []
        for index, item in enumerate(doc.get("items") or []):
            found.extend("items[%d] %s" % (index, p) for p in problems(item, versions))
        return found
    found = []
    builtin = builtin_kind(api_version, kind)
    custom = custom_resource(api_version, kind) if builtin is None else None
    if builtin is not None:
        per_version = collections.OrderedDict()
        for version in versions:
            validator = _builtin_validator(api_version, kind, version)
            if validator is None:
                per_version.setdefault("<root>: no schema for %s %s" % (api_version, kind), []).append(version)
                continue
            for problem in _schema_problems(validator, doc):
                per_version.setdefault(problem, []).append(version)
        for problem, in_versions in per_version.items():
            if len(versions) > 1:
                problem += " (Kubernetes %s)" % ", ".join(kv_utils.major_minor(v) for v in in_versions)
            found.append(problem)
        namespaced = builtin.namespaced
        if kind == "ConfigMap":
            found.extend(_configmap_problems(doc))
        found.extend(_semantic_problems(doc))
    elif custom is not None:
        found.extend(_schema_problems(_custom_validator(api_version, kind), doc))
        namespaced = custom.namespaced
    else:
        known = sorted("%s/%s %s" % (c.group, c.version, c.kind) for c in custom_resources().values())
        return ["%s: unknown kind %s %s: it is neither built into Kubernetes nor described in %s (known custom "
                "resources: %s)" % (label, api_version, kind, CRD_SCHEMA_DIR, ", ".join(known))]
    found = _metadata_problems(doc, namespaced) + found
    # de-duplicate while keeping the order
    return ["%s: %s" % (label, p) for p in dict.fromkeys(found)]


def validate(doc, versions=VERSIONS):
    """Raise ManifestError unless the manifest is valid."""
    found = problems(doc, versions)
    if found:
        raise ManifestError(found)


def load_documents(path):
    """[(source, document)] from a YAML file or every *.yml/*.yaml/*.json file under a folder (sorted)."""
    if os.path.isdir(path):
        files = sorted(os.path.join(d, f) for d, _dirs, names in os.walk(path) for f in names
                       if f.endswith((".yml", ".yaml", ".json")))
    elif os.path.isfile(path):
        files = [path]
    else:
        raise ManifestError(["%s: no such file or folder" % path])
    documents = []
    for name in files:
        with open(name, encoding="utf-8") as handle:
            for index, doc in enumerate(yaml.safe_load_all(handle)):
                if doc is not None:
                    documents.append(("%s#%d" % (name, index), doc))
    return documents


def validate_path(path, versions=VERSIONS):
    """Validate every manifest in a file or folder; return how many were checked.

    An empty file or folder is an error too: a render step that wrote nothing must not pass.
    """
    documents = load_documents(path)
    if not documents:
        raise ManifestError(["%s: no Kubernetes manifests found" % path])
    found = []
    for source, doc in documents:
        found.extend("%s: %s" % (source, p) for p in problems(doc, versions))
    if found:
        raise ManifestError(found)
    return len(documents)
