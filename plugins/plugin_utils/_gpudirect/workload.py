# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPUDirect workload patcher (controller only, filter ``gpudirect_workload``).

The guide's "add GPUDirect to your manifests" steps as one function, ``patch_workload``: pod
annotations for the GPU-NIC interfaces, the RxDM daemon (native or classic sidecar), the devices,
volumes and mounts of the fabric, and the recommended NCCL environment, applied to a Pod, Job,
Deployment, StatefulSet or JobSet. Every fact comes from the catalogs (``_catalog/gke_gpudirect`` and
``_catalog/nccl``); a re-patch updates what an earlier patch wrote and keeps the user's own values.
"""

from __future__ import annotations

import copy
import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import (
    ACCELERATOR_LABEL, CONTROL_INTERFACE, DAEMONS, DEFAULT_INTERFACE_ANNOTATION, DEFAULT_NETWORK, DRANET_CLAIM,
    dranet_claim_template,
    GPU_CONTAINER_MOUNTS, GPU_SHARING_LABELS, INTERFACES_ANNOTATION, MACHINES,
    MACHINE_TYPE_LABEL, NATIVE_SIDECAR_MIN_GKE, PROFILES, PROFILE_NAMES, WORKLOAD_VOLUMES, device_annotation,
    gke_minor, image_ref, interface_names, interfaces_annotation, native_sidecar_supported, pod_tolerations, release,
    sharing_refusal,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import GPU_RESOURCE
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.nccl import NCCL_PLUGIN_KEYS, PATH_KEYS, nccl_environment


# --------------------------------------------------------------------------------------------
# Workload patch (the guide's "add GPUDirect to your manifests")
# --------------------------------------------------------------------------------------------

WORKLOAD_KINDS = {
    # kind -> (apiVersion, path to the pod template(s))
    "Pod": ("v1", None),
    "Job": ("batch/v1", ("spec", "template")),
    "Deployment": ("apps/v1", ("spec", "template")),
    "StatefulSet": ("apps/v1", ("spec", "template")),
    "JobSet": ("jobset.x-k8s.io/v1alpha2", None),
}
SIDECAR_MODES = ("auto", "native", "classic")
# Pod annotation listing the env keys the patch manages (so a re-patch can update or drop them).
MANAGED_ENV_ANNOTATION = "gpu-ops.cluster/gpudirect-env"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


class WorkloadError(ValueError):
    """A manifest the GPUDirect patch refuses, with the reason."""


def _network_names(network_names, entry, fabric):
    if not isinstance(network_names, (list, tuple)):
        raise WorkloadError("network_names: a list of %d Network names is required" % entry["gpu_nic_count"])
    names = []
    for item in network_names:
        if isinstance(item, dict):  # a Network object as read from the cluster
            item = (item.get("metadata") or {}).get("name")
        if not isinstance(item, str) or len(item) > 253 or not _DNS_SUBDOMAIN.match(item):
            raise WorkloadError("network_names: %r is not a Network object name" % (item,))
        if item == DEFAULT_NETWORK:
            raise WorkloadError("network_names: %r is the pod network; list the GPU NIC networks only" % item)
        names.append(item)
    if len(names) != entry["gpu_nic_count"]:
        raise WorkloadError("network_names: %s needs %d GPU NIC networks, %d given" % (
            fabric, entry["gpu_nic_count"], len(names)))
    if len(set(names)) != len(names):
        raise WorkloadError("network_names: names repeat: %s" % ", ".join(names))
    return names


def _pod_templates(manifest):
    """[(where, template)] of a manifest; template is the dict holding metadata + spec."""
    kind = manifest.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise WorkloadError("kind %r is not supported; supported: %s" % (kind, ", ".join(sorted(WORKLOAD_KINDS))))
    api_version, path = WORKLOAD_KINDS[kind]
    if manifest.get("apiVersion") != api_version:
        raise WorkloadError("%s must have apiVersion %s, not %r" % (kind, api_version, manifest.get("apiVersion")))
    name = (manifest.get("metadata") or {}).get("name", "?")
    if kind == "Pod":
        return [("Pod/%s" % name, manifest)]
    if kind == "JobSet":
        jobs = (manifest.get("spec") or {}).get("replicatedJobs")
        if not isinstance(jobs, list) or not jobs:
            raise WorkloadError("JobSet/%s has no spec.replicatedJobs" % name)
        found = []
        for index, job in enumerate(jobs):
            template = (((job or {}).get("template") or {}).get("spec") or {}).get("template")
            if not isinstance(template, dict):
                raise WorkloadError("JobSet/%s spec.replicatedJobs[%d] has no template.spec.template" % (name, index))
            found.append(("JobSet/%s replicatedJobs[%s]" % (name, job.get("name", index)), template))
        return found
    template = manifest
    for part in path:
        template = template.get(part) if isinstance(template, dict) else None
    if not isinstance(template, dict):
        raise WorkloadError("%s/%s has no spec.template" % (kind, name))
    return [("%s/%s" % (kind, name), template)]


def _gpu_count(container):
    resources = container.get("resources") or {}
    counts = []
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(GPU_RESOURCE)
        if value is not None:
            try:
                counts.append(int(str(value)))
            except ValueError:
                raise WorkloadError("container %s: %s %s %r is not a whole number" % (
                    container.get("name"), section, GPU_RESOURCE, value))
    if len(counts) == 2 and counts[0] != counts[1]:
        raise WorkloadError("container %s: %s limits (%d) and requests (%d) differ" % (
            container.get("name"), GPU_RESOURCE, counts[0], counts[1]))
    return counts[0] if counts else 0


def _selector_values(spec, key):
    """Values a pod spec requires for a node label (nodeSelector and required node affinity)."""
    values = []
    selector = spec.get("nodeSelector") or {}
    if key in selector:
        values.append(str(selector[key]))
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in (term or {}).get("matchExpressions") or []:
            if expr.get("key") == key and expr.get("operator") in ("In", "Exists"):
                values.extend(str(v) for v in expr.get("values") or ["*"])
    return values


def _check_template(where, template, entry, fabric, daemon_name):
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise WorkloadError("%s: no pod spec" % where)
    if spec.get("hostNetwork"):
        raise WorkloadError("%s: hostNetwork pods cannot use the multi-network annotations; "
                            "remove hostNetwork: true" % where)
    for key in GPU_SHARING_LABELS:
        if _selector_values(spec, key):
            raise WorkloadError("%s: selects shared GPUs (%s); %s" % (where, key, sharing_refusal(fabric)))
    for value in _selector_values(spec, ACCELERATOR_LABEL):
        if value != "*" and value not in entry["accelerator_types"]:
            raise WorkloadError("%s: selects %s=%s but %s runs on %s" % (
                where, ACCELERATOR_LABEL, value, fabric, ", ".join(entry["accelerator_types"])))
    for value in _selector_values(spec, MACHINE_TYPE_LABEL):
        if value != "*" and value not in entry["machine_types"]:
            raise WorkloadError("%s: selects %s=%s but %s runs on %s" % (
                where, MACHINE_TYPE_LABEL, value, fabric, ", ".join(entry["machine_types"])))
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise WorkloadError("%s: no containers" % where)
    gpus = sum(_gpu_count(c) for c in containers if c.get("name") != daemon_name)
    for init in spec.get("initContainers") or []:
        if init.get("name") != daemon_name and _gpu_count(init):
            raise WorkloadError("%s: init container %s requests GPUs; only regular containers may" % (
                where, init.get("name")))
    return gpus


def _machine_from_template(spec, fabric):
    for value in _selector_values(spec, MACHINE_TYPE_LABEL):
        if value in MACHINES:
            return value
    for value in _selector_values(spec, ACCELERATOR_LABEL):
        matches = [m for m in PROFILES[fabric]["machine_types"] if MACHINES[m]["accelerator_type"] == value]
        if matches:
            return matches[0]
    return None


def _ensure_volume(where, volumes, wanted):
    for volume in volumes:
        if volume.get("name") == wanted["name"]:
            if volume != wanted:
                raise WorkloadError("%s: volume %s exists with another source (%s); rename it" % (
                    where, wanted["name"], json.dumps(volume, sort_keys=True)))
            return
    volumes.append(copy.deepcopy(wanted))


def _ensure_mount(where, container, name, path, read_only):
    mounts = container.setdefault("volumeMounts", [])
    for mount in mounts:
        if mount.get("mountPath") == path:
            if mount.get("name") != name:
                raise WorkloadError("%s: container %s already mounts volume %s at %s" % (
                    where, container.get("name"), mount.get("name"), path))
            return
    mount = dict(name=name, mountPath=path)
    if read_only:
        mount["readOnly"] = True
    mounts.append(mount)


def _merge_env(where, container, env, previous, warnings):
    """Set ``env`` in a container. Keys the previous patch managed are replaced or dropped; keys the
    user set stay (LD_LIBRARY_PATH gets the library directory appended). Returns the user's keys."""
    owned = set()
    entries = container.setdefault("env", [])
    by_name = dict((e.get("name"), e) for e in entries)
    for key in previous:
        if key not in env and key in by_name:
            entries.remove(by_name.pop(key))
    for key, value in env.items():
        existing = by_name.get(key)
        if existing is None:
            entry = dict(name=key, value=value)
            entries.append(entry)
            by_name[key] = entry
        elif key in previous:
            existing.pop("valueFrom", None)
            existing["value"] = value
        elif key in PATH_KEYS:
            owned.add(key)
            if "valueFrom" in existing:
                raise WorkloadError("%s: container %s sets %s from valueFrom; set it as a value that "
                                    "includes %s" % (where, container.get("name"), key, value))
            parts = [p for p in str(existing.get("value", "")).split(":") if p]
            if value not in parts:
                existing["value"] = ":".join(parts + [value])
        else:
            owned.add(key)
            if existing.get("value") != value:
                warnings.append("%s: container %s keeps its own %s=%s (recommended: %s)" % (
                    where, container.get("name"), key, existing.get("value", "<valueFrom>"), value))
    if not entries:
        container.pop("env")
    return owned


# --------------------------------------------------------------------------------------------
# Settings an RDMA profile refuses (checked before any change)
# --------------------------------------------------------------------------------------------

# Role variable prefixes of the TCPX/TCPXO node software: the installers with their RxDM release and the NRI
# device injector. GPUDirect-RDMA installs gIB and runs no daemon and no injector.
TCPX_SETTING_PREFIXES = ("tcpx_installer_", "tcpxo_installer_", "nri_device_injector_")
# NCCL Fast Socket (GKE's socket plugin): incompatible with GPUDirect-RDMA (AICR's A4X guide).
FAST_SOCKET_PREFIX = "NCCL_FASTSOCKET_"
FAST_SOCKET_NET = "FastSocket"
# node pool keys that enable GPU sharing or Fast Socket
_POOL_SHARING_KEYS = ("gpu_sharing", "gpu_partition_size")
_POOL_FAST_SOCKET_KEYS = ("fast_socket", "enable_fast_socket")


def _overrides_conflicts(name, overrides, fabric):
    problems = []
    for key in sorted(overrides or {}):
        value = (overrides or {})[key]
        if not isinstance(key, str):
            continue
        if key.startswith(FAST_SOCKET_PREFIX):
            problems.append("%s.%s: NCCL Fast Socket does not work with GPUDirect-RDMA" % (name, key))
        for prefix, (owner, _keys) in NCCL_PLUGIN_KEYS.items():
            if key.startswith(prefix):
                problems.append("%s.%s: a GPUDirect-%s setting; %s uses the gIB plugin" % (name, key, owner.upper(), fabric))
        if key == "NCCL_NET" and value is not None and str(value) != "gIB":
            what = "NCCL Fast Socket" if str(value) == FAST_SOCKET_NET else "another network plugin"
            problems.append("%s.NCCL_NET: %s selects %s; GPUDirect-RDMA needs NCCL_NET=gIB (no socket fallback)" % (
                name, value, what))
    return problems


def rdma_conflicts(fabric, settings):
    """Why ``settings`` conflict with a GPUDirect-RDMA profile: one text per conflict (empty: none).

    ``settings``: variable name -> value, as a play has them: the TCPX/TCPXO installer and NRI injector
    variables (any ``tcpx_installer_*``, ``tcpxo_installer_*``, ``nri_device_injector_*`` set at all),
    a ``*_sidecar`` other than auto (the RxDM daemon), ``*nccl_overrides`` with Fast Socket or
    TCPX/TCPXO keys or an NCCL_NET other than gIB, a ``*node_pool`` that shares GPUs (gpu_sharing,
    gpu_partition_size, the GKE GPU sharing node labels) or enables Fast Socket. TCPX and TCPXO
    profiles have none of these conflicts. ValueError for an unknown profile.
    """
    if fabric not in PROFILES:
        raise ValueError("fabric: %r is not a GPUDirect profile; allowed: %s" % (fabric, ", ".join(PROFILE_NAMES)))
    if PROFILES[fabric]["device_mode"] != "RDMA":
        return []
    if not isinstance(settings, dict):
        raise ValueError("settings: a dict of variable name -> value is required")
    problems = []
    for name in sorted(settings):
        value = settings[name]
        if name.startswith(TCPX_SETTING_PREFIXES):
            problems.append("%s: a TCPX/TCPXO daemon setting; %s installs gIB and runs no RxDM daemon and no NRI "
                            "device injector (remove it)" % (name, fabric))
        elif (name == "sidecar" or name.endswith("_sidecar")) and value not in (None, "", "auto"):
            problems.append("%s: %s asks for the RxDM daemon sidecar; %s pods have none" % (name, value, fabric))
        elif name.endswith("nccl_overrides") and isinstance(value, dict):
            problems.extend(_overrides_conflicts(name, value, fabric))
        elif name.endswith("node_pool") and isinstance(value, dict):
            for key in _POOL_SHARING_KEYS:
                if value.get(key):
                    problems.append("%s.%s: %s" % (name, key, sharing_refusal(fabric)))
            for key in _POOL_FAST_SOCKET_KEYS:
                if value.get(key):
                    problems.append("%s.%s: NCCL Fast Socket does not work with GPUDirect-RDMA" % (name, key))
            labels = value.get("node_labels") or {}
            for key in GPU_SHARING_LABELS:
                if isinstance(labels, dict) and key in labels:
                    problems.append("%s.node_labels.%s: %s" % (name, key, sharing_refusal(fabric)))
    return problems


def _daemon_container(fabric, image):
    spec = DAEMONS[fabric]
    container = dict(name=spec["name"], image=image, command=list(spec["command"]))
    if spec["args"]:
        container["args"] = list(spec["args"])
    container["securityContext"] = dict(capabilities=dict(add=list(spec["capabilities"])))
    container["volumeMounts"] = [dict(name=n, mountPath=p) for n, p in spec["mounts"]]
    container["env"] = [dict(name=k, value=v) for k, v in spec["env"].items()]
    return container


def _dranet_claims(where, spec, template_name):
    """Name the DRANET claim in the pod spec (spec.resourceClaims) and return the claim entry of the GPU containers."""
    claims = spec.setdefault("resourceClaims", [])
    for claim in claims:
        if claim.get("name") == DRANET_CLAIM:
            if claim.get("resourceClaimTemplateName") != template_name:
                raise WorkloadError("%s: resourceClaims entry %s exists with another source (%s); rename it" % (
                    where, DRANET_CLAIM, json.dumps(claim, sort_keys=True)))
            break
    else:
        claims.append(dict(name=DRANET_CLAIM, resourceClaimTemplateName=template_name))
    return dict(name=DRANET_CLAIM)


def _tolerates(toleration, wanted):
    """Whether one toleration of a pod spec already tolerates the taint of ``wanted`` (Kubernetes' own matching)."""
    if not isinstance(toleration, dict):
        return False
    if toleration.get("effect") not in (None, "", wanted["effect"]):
        return False
    if toleration.get("operator") == "Exists":
        return toleration.get("key") in (None, "", wanted["key"])
    return toleration.get("key") == wanted["key"] and toleration.get("value") == wanted["value"]


def _ensure_tolerations(where, spec, fabric):
    """Add the tolerations the profile's nodes need (their taints: the catalog's, by machine architecture) that the
    pod spec does not have yet; a pod without them never schedules there (A4X: arm64 nodes)."""
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = spec["tolerations"] = []
    if not isinstance(tolerations, list):
        raise WorkloadError("%s: spec.tolerations must be a list" % where)
    for wanted in pod_tolerations(fabric):
        if not any(_tolerates(t, wanted) for t in tolerations):
            tolerations.append(dict(wanted))


# --------------------------------------------------------------------------------------------
# ComputeDomains (multi-node NVLink through IMEX; the NVIDIA DRA driver)
# --------------------------------------------------------------------------------------------

def _dns_name(field, value):
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise WorkloadError("%s: %r is not a Kubernetes object name (lower case letters, digits, '-' and '.')" % (field, value))
    return value


def compute_domain(name, namespace=None, claim_template=None):
    """The ComputeDomain of one job: v1beta1, numNodes 0 (the driver's recommendation; the field is deprecated),
    allocationMode Single (one IMEX channel per node), its channel ResourceClaimTemplate ``<name>-channel`` unless
    ``claim_template`` names another. The controller creates that template in the same namespace; the spec is immutable,
    so a job that needs another one gets a new ComputeDomain."""
    api = dra_driver.COMPUTE_DOMAIN
    _dns_name("name", name)
    template = _dns_name("claim_template", claim_template if claim_template is not None
                         else name + dra_driver.CHANNEL_TEMPLATE_SUFFIX)
    metadata = dict(name=name)
    if namespace is not None:
        metadata["namespace"] = _dns_name("namespace", namespace)
    return dict(apiVersion="%s/%s" % (api["group"], api["version"]), kind=api["kind"], metadata=metadata,
                spec=dict(numNodes=api["default_num_nodes"],
                          channel=dict(resourceClaimTemplate=dict(name=template),
                                       allocationMode=api["default_allocation_mode"])))


def _channel_template(domain, fabric):
    """The channel ResourceClaimTemplate name a ComputeDomain (as ``compute_domain`` builds it, or as read) gives its pods."""
    api = dra_driver.COMPUTE_DOMAIN
    machines = [m for m in PROFILES[fabric]["machine_types"] if m not in dra_driver.MULTI_NODE_NVLINK_MACHINES]
    if machines:
        raise WorkloadError("compute_domain: %s runs on %s, whose NVLink does not span nodes; a ComputeDomain needs %s" % (
            fabric, ", ".join(machines), ", ".join(dra_driver.MULTI_NODE_NVLINK_MACHINES)))
    if not isinstance(domain, dict) or domain.get("kind") != api["kind"] \
            or domain.get("apiVersion") != "%s/%s" % (api["group"], api["version"]):
        raise WorkloadError("compute_domain: a %s object (apiVersion %s/%s) is required, as the compute_domain filter "
                            "returns it" % (api["kind"], api["group"], api["version"]))
    channel = (domain.get("spec") or {}).get("channel") or {}
    mode = channel.get("allocationMode", api["default_allocation_mode"])
    if mode != api["default_allocation_mode"]:
        raise WorkloadError("compute_domain.spec.channel.allocationMode: %r gives a pod every IMEX channel of its node; "
                            "allowed: %s (one channel per node)" % (mode, api["default_allocation_mode"]))
    return _dns_name("compute_domain.spec.channel.resourceClaimTemplate.name",
                     (channel.get("resourceClaimTemplate") or {}).get("name"))


def _channel_claim(where, spec, template_name):
    """Name the channel claim in spec.resourceClaims; refuse a pod that would claim a channel twice."""
    claims = spec.setdefault("resourceClaims", [])
    if not isinstance(claims, list):
        raise WorkloadError("%s: spec.resourceClaims must be a list" % where)
    for claim in claims:
        if claim.get("name") == dra_driver.CHANNEL_CLAIM:
            if claim.get("resourceClaimTemplateName") != template_name:
                raise WorkloadError("%s: spec.resourceClaims entry %s exists with another source (%s); rename it" % (
                    where, dra_driver.CHANNEL_CLAIM, json.dumps(claim, sort_keys=True)))
            break
        if claim.get("resourceClaimTemplateName") == template_name:
            raise WorkloadError("%s: spec.resourceClaims entry %s already claims %s: a second claim would take the node's "
                                "IMEX channel twice (a node has one); remove it" % (where, claim.get("name"), template_name))
    else:
        claims.append(dict(name=dra_driver.CHANNEL_CLAIM, resourceClaimTemplateName=template_name))
    return dict(name=dra_driver.CHANNEL_CLAIM)


def _require_clique(spec):
    """Add a required node affinity term on the clique label (every term: terms are alternatives) unless present."""
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        if not any(e.get("key") == dra_driver.CLIQUE_LABEL for e in expressions):
            expressions.append(dict(key=dra_driver.CLIQUE_LABEL, operator="Exists"))


def _ensure_claim(container, claim):
    claims = container.setdefault("resources", {}).setdefault("claims", [])
    if not any(c.get("name") == claim["name"] for c in claims):
        claims.append(dict(claim))


def patch_workload(manifest, fabric, network_names, gke_version=None, sidecar="auto", registry=None,
                   machine_type=None, interfaces=None, nccl_overrides=None, warnings=None, dranet=False,
                   claim_template=None, compute_domain=None):
    """A copy of a Pod/Job/JobSet/Deployment/StatefulSet manifest with GPUDirect added.

    Adds what the guide's "add GPUDirect to your manifests" section adds: the NRI device annotation
    (tcpx, tcpxo), the multi-network annotations built from ``network_names`` (the Network objects'
    names, in GPU NIC order), the RxDM daemon as a native sidecar (GKE >= 1.29 or ``sidecar:
    native``) or a classic sidecar, the volumes, the GPU containers' mounts, LD_LIBRARY_PATH and the
    NCCL environment of ``nccl_environment``. Applying it to its own output changes nothing.

    Refuses (WorkloadError) unknown kinds, pods that ask for other than all GPUs of the node,
    shared GPUs (MPS, time-sharing, MIG node selectors), hostNetwork pods, and conflicting volumes or
    mounts. ``warnings`` (a list) receives the warnings.

    ``dranet``: the node pool runs the managed accelerator network profile (GKE DRANET, RDMA profiles only): the
    pods claim the node's RDMA NICs through the catalog's ResourceClaimTemplate (``claim_template`` names it;
    default the catalog's name) in ``spec.resourceClaims`` and the GPU containers' ``resources.claims``, and get
    no multi-network annotation (``network_names`` must be empty). The template itself is the catalog's
    ``dranet_claim_template``, applied next to the workload.

    ``compute_domain``: a ComputeDomain (as ``compute_domain`` builds it; multi-node NVLink machines only): every pod
    that requests GPUs claims the domain's IMEX channel (``spec.resourceClaims`` and its GPU containers'
    ``resources.claims``) and requires a node with the clique label. A node has one channel, so the pod must hold every
    GPU of its node; a pod that would claim the channel twice is refused.
    """
    warnings = [] if warnings is None else warnings
    if fabric not in PROFILES:
        raise WorkloadError("fabric: %r has no GKE workload patch; allowed: %s" % (fabric, ", ".join(PROFILE_NAMES)))
    if sidecar not in SIDECAR_MODES:
        raise WorkloadError("sidecar: %r is not one of %s" % (sidecar, ", ".join(SIDECAR_MODES)))
    if not isinstance(manifest, dict):
        raise WorkloadError("the manifest must be a mapping, not %s" % type(manifest).__name__)
    entry = PROFILES[fabric]
    conflicts = rdma_conflicts(fabric, dict(sidecar=sidecar, nccl_overrides=nccl_overrides))
    if conflicts:
        raise WorkloadError("; ".join(conflicts))
    if dranet:
        # raises for a non-RDMA profile, naming the RDMA ones
        try:
            template_name = dranet_claim_template(fabric, claim_template)["metadata"]["name"]
        except ValueError as exc:
            raise WorkloadError("dranet: %s" % exc)
        if not isinstance(template_name, str) or len(template_name) > 253 or not _DNS_SUBDOMAIN.match(template_name):
            raise WorkloadError("claim_template: %r is not a ResourceClaimTemplate name" % (template_name,))
        if network_names:
            raise WorkloadError("network_names: with dranet GKE attaches the RDMA NICs through the %s claim; "
                                "give no Network names" % DRANET_CLAIM)
        names = None
    elif claim_template is not None:
        raise WorkloadError("claim_template: only with dranet (the managed accelerator network profile)")
    else:
        names = _network_names(network_names, entry, fabric)
    if gke_version is not None:
        try:
            gke_minor(gke_version)
        except ValueError as exc:
            raise WorkloadError("gke_version: %s" % exc)
    native = sidecar == "native"
    if sidecar == "auto":
        native = gke_version is None or native_sidecar_supported(gke_version)
    elif native and gke_version is not None and not native_sidecar_supported(gke_version):
        raise WorkloadError("sidecar: native sidecars need GKE >= %s, the cluster runs %s" % (
            NATIVE_SIDECAR_MIN_GKE, gke_version))
    channel_template = _channel_template(compute_domain, fabric) if compute_domain is not None else None
    if channel_template is not None:
        # the controller creates the channel template in the ComputeDomain's namespace: a pod elsewhere finds none
        domain_namespace = (compute_domain.get("metadata") or {}).get("namespace")
        namespace = (manifest.get("metadata") or {}).get("namespace")
        if domain_namespace and namespace and domain_namespace != namespace:
            raise WorkloadError("compute_domain.metadata.namespace: %s, but the workload runs in %s; the channel's "
                                "ResourceClaimTemplate is created in the ComputeDomain's namespace" % (domain_namespace, namespace))
    daemon_name = DAEMONS[fabric]["name"] if fabric in DAEMONS else None
    daemon_image = image_ref(release(fabric, gke_version)["daemon"], registry) if daemon_name else None

    result = copy.deepcopy(manifest)
    templates = _pod_templates(result)
    patched = 0
    for where, template in templates:
        gpus = _check_template(where, template, entry, fabric, daemon_name)
        if gpus == 0 and result["kind"] == "JobSet" and len(templates) > 1:
            continue  # a coordinator/driver job without GPUs stays as it is
        if gpus != entry["gpus_per_node"] and channel_template is not None:
            raise WorkloadError(
                "%s: requests %d of the %d GPUs of a %s node; with compute_domain a node's single IMEX channel goes to one "
                "pod, so pods per node (1) x GPUs per pod (%d) must be the node's %d GPUs" % (
                    where, gpus, entry["gpus_per_node"], entry["machine_type"], gpus, entry["gpus_per_node"]))
        if gpus != entry["gpus_per_node"]:
            raise WorkloadError(
                "%s: requests %d of the %d GPUs of a %s node; GPUDirect-%s needs all GPUs of the node "
                "(one pod per node)" % (where, gpus, entry["gpus_per_node"], entry["machine_type"], fabric.upper()))
        spec = template["spec"]
        kind_machine = machine_type or _machine_from_template(spec, fabric)
        env_warnings = []
        try:
            env, env_warnings = nccl_environment(fabric, gke_version, kind_machine, interfaces, nccl_overrides)
        except ValueError as exc:
            raise WorkloadError(str(exc))
        for message in env_warnings:
            if message not in warnings:
                warnings.append(message)
        used_interfaces = list(interfaces) if interfaces else interface_names(fabric)

        metadata = template.setdefault("metadata", {})
        annotations = metadata.setdefault("annotations", {})
        previous = [k for k in str(annotations.get(MANAGED_ENV_ANNOTATION, "")).split(",") if k]
        device = device_annotation(fabric)
        if device:
            annotations[device[0]] = device[1]
        if dranet:
            if INTERFACES_ANNOTATION in annotations:
                raise WorkloadError("%s: has the %s annotation; with dranet GKE attaches the RDMA NICs through the "
                                    "%s claim: remove it" % (where, INTERFACES_ANNOTATION, DRANET_CLAIM))
            claim = _dranet_claims(where, spec, template_name)
        else:
            annotations[DEFAULT_INTERFACE_ANNOTATION] = CONTROL_INTERFACE
            annotations[INTERFACES_ANNOTATION] = interfaces_annotation(fabric, names, used_interfaces)

        _ensure_tolerations(where, spec, fabric)
        channel = None
        if channel_template is not None:
            channel = _channel_claim(where, spec, channel_template)
            _require_clique(spec)
        volumes = spec.setdefault("volumes", [])
        for volume in WORKLOAD_VOLUMES[fabric]:
            _ensure_volume(where, volumes, volume)

        owned = set()
        for container in spec["containers"]:
            if container.get("name") == daemon_name or not _gpu_count(container):
                continue
            for name, path, read_only in GPU_CONTAINER_MOUNTS[fabric]:
                _ensure_mount(where, container, name, path, read_only)
            if dranet:
                _ensure_claim(container, claim)
            if channel is not None:
                _ensure_claim(container, channel)
            owned |= _merge_env(where, container, env, previous, warnings)
        annotations[MANAGED_ENV_ANNOTATION] = ",".join(k for k in env if k not in owned)

        if daemon_name:
            spec["containers"] = [c for c in spec["containers"] if c.get("name") != daemon_name]
            inits = [c for c in spec.get("initContainers") or [] if c.get("name") != daemon_name]
            daemon = _daemon_container(fabric, daemon_image)
            if native:
                daemon["restartPolicy"] = "Always"
                inits.insert(0, daemon)
            else:
                spec["containers"].append(daemon)
                if result["kind"] in ("Job", "JobSet"):
                    message = ("%s: the classic %s sidecar keeps running after the main container exits, so "
                               "the Job does not complete on its own; use GKE >= %s for a native sidecar" % (
                                   where, daemon_name, NATIVE_SIDECAR_MIN_GKE))
                    warnings.append(message)
            if inits:
                spec["initContainers"] = inits
            else:
                spec.pop("initContainers", None)
        patched += 1
    if not patched:
        raise WorkloadError("%s/%s: no pod template requests GPUs" % (
            result["kind"], (result.get("metadata") or {}).get("name", "?")))
    return result
