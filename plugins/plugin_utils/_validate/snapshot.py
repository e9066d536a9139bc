# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The validation snapshot: one document that holds everything the non-performance checks read, built from
read-only calls (kubernetes.core.k8s_info, the collection's *_info modules, gpu_host_facts), and the view the
checks read it through.

Shape (``format``/``version`` name it)::

    target: {name, kind: kubernetes|host}
    kubernetes: {nodes, daemonsets, pods, cluster_policies, nic_cluster_policies,
                 network_param_sets, networks,                                   (k8s targets; GKE
                                                                                 GKENetworkParamSet / Network)
                 resource_slices, compute_domains,                               (the NVIDIA DRA driver's ResourceSlices
                 compute_domain_daemon_logs}                                     and ComputeDomains; the cause lines of
                                                                                 its daemons' logs)
    gke: {cluster, node_pools, nics}                                             (GKE targets, optional)
    mig_parted: {source, config}      (optional: the MIG manager's mig-parted config, for custom MIG configs)
    host: <gpu_host facts>                                                       (host targets)
    health: {level, dcgm, nvbandwidth, nccl_loopback}   (optional: the health phase's probe outputs)
    performance: {tolerance, nccl, ib_write_bw}     (optional: the performance phase's probe outputs)

A collection that was not read, or whose read failed, is null (or absent): the checks that need it end as
``other``. An empty list is a read that found nothing. Pods keep what the checks judge (resources, the
multi-networking and device-injection annotations, volume names and kinds, NCCL environment, their containers' state
reasons and exit codes but no state or condition message). No object keeps an
environment value outside the NCCL and library path variables, a command line, another annotation (such as
``last-applied-configuration``) or its managed fields, and nothing of a Secret is kept. A snapshot read from a file
(``loaded``) is reduced the same way before anything shows it.
"""

from __future__ import annotations

import copy
import json
import re

import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver, gke_gpudirect
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.names import is_secret_kind
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing.gpu_sharing import pod_gpu_requests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip

FORMAT = "gpu_ops.cluster/validate-snapshot"
VERSION = 1
KINDS = ("kubernetes", "host")
KUBERNETES_KEYS = ("nodes", "daemonsets", "pods", "cluster_policies", "nic_cluster_policies", "network_param_sets", "networks",
                   "resource_slices", "compute_domains", "compute_domain_daemon_logs")
# the collections read with k8s_info (the daemons' log lines are added after the snapshot is built: with_daemon_logs)
READ_KEYS = tuple(k for k in KUBERNETES_KEYS if k != "compute_domain_daemon_logs")
_KEPT_ENV = re.compile(r"^(NCCL_|LD_LIBRARY_PATH\Z|NVIDIA_VISIBLE_DEVICES\Z|CUDA_VISIBLE_DEVICES\Z)")
_ENV_SCRIPTS = (gke_gpudirect.TCPXO_ENV_SCRIPT, gke_gpudirect.GIB_ENV_SCRIPT)
# (sources_nccl_env_script: what a snapshot keeps of a command, so that a snapshot file loads back unchanged)
_CONTAINER_KEYS = ("name", "image", "resources", "volumeMounts", "securityContext", "restartPolicy", "sources_nccl_env_script")
# the annotations the checks judge (a pod's and a node's multi-networking, the NRI device injection); any other may
# hold anything
_KEPT_ANNOTATIONS = (gke_gpudirect.INTERFACES_ANNOTATION, gke_gpudirect.DEFAULT_INTERFACE_ANNOTATION,
                     gke_gpudirect.NORTH_INTERFACES_ANNOTATION, gke_gpudirect.NIC_INFO_ANNOTATION)
_KEPT_ANNOTATION_PREFIX = gke_gpudirect.NRI_INJECTOR["annotation_prefix"]
_COMMAND_KEYS = ("command", "args")


# --------------------------------------------------------------------------------------------
# Building a snapshot
# --------------------------------------------------------------------------------------------

def _env(items):
    env = []
    for item in items if isinstance(items, list) else []:
        name = item.get("name") if isinstance(item, dict) else None
        if name and _KEPT_ENV.match(str(name)) and "value" in item:
            env.append(dict(name=name, value=item.get("value")))
        elif name:
            env.append(dict(name=name))   # the name tells the check it is set; its value or source is not kept
    return env


def _container(container):
    kept = dict((k, copy.deepcopy(container[k])) for k in _CONTAINER_KEYS if k in container)
    env = _env(container.get("env"))
    if env:
        kept["env"] = env
    command = " ".join(str(part) for part in (container.get("command") or []) + (container.get("args") or []))
    if any(script in command for script in _ENV_SCRIPTS):
        kept["sources_nccl_env_script"] = True   # the command is not kept, only that it sources the fabric's script
    return kept


def _volume(volume):
    """A volume's name and the kind of its source; a hostPath keeps its path, nothing else is kept."""
    kept = dict(name=volume.get("name"))
    for key, value in volume.items():
        if key == "name":
            continue
        kept[key] = dict(path=(value or {}).get("path")) if key == "hostPath" else {}
    return kept


def _annotations(meta):
    return dict((k, v) for k, v in (meta.get("annotations") or {}).items()
                if k in _KEPT_ANNOTATIONS or str(k).startswith(_KEPT_ANNOTATION_PREFIX))


def _without_values(value):
    """A copy of a spec or status with every env list reduced to its names (NCCL's values kept) and every command
    line left out, at any depth: a DaemonSet's pod template, a ClusterPolicy component's env and args."""
    if isinstance(value, dict):
        return dict((k, _env(v) if k == "env" else _without_values(v)) for k, v in value.items() if k not in _COMMAND_KEYS)
    if isinstance(value, list):
        return [_without_values(v) for v in value]
    return value


def scrub_object(doc):
    """A Node, DaemonSet or operator policy as the checks read it: its metadata without managed fields and with only
    the annotations the checks judge, its spec and status without env values or command lines."""
    kept = dict((k, copy.deepcopy(doc[k])) for k in ("apiVersion", "kind") if k in doc)
    meta = doc.get("metadata") or {}
    kept["metadata"] = dict((k, copy.deepcopy(v)) for k, v in meta.items() if k not in ("annotations", "managedFields"))
    if _annotations(meta):
        kept["metadata"]["annotations"] = _annotations(meta)
    kept.update((k, _without_values(doc[k])) for k in ("spec", "status") if k in doc)
    return kept


def scrub_pod(pod):
    """The parts of a Pod the checks read (spec only: no Secret data, no env values but NCCL's)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = _annotations(meta)
    return dict(
        apiVersion="v1", kind="Pod",
        metadata=dict(name=meta.get("name"), namespace=meta.get("namespace"), labels=copy.deepcopy(meta.get("labels") or {}),
                      annotations=copy.deepcopy(annotations), ownerReferences=copy.deepcopy(meta.get("ownerReferences") or [])),
        spec=dict(nodeName=spec.get("nodeName"), hostNetwork=spec.get("hostNetwork", False), hostIPC=spec.get("hostIPC", False),
                  containers=[_container(c) for c in spec.get("containers") or []],
                  initContainers=[_container(c) for c in spec.get("initContainers") or []],
                  volumes=[_volume(v) for v in spec.get("volumes") or []]),
        status=_pod_status(status),
    )


# what a container's state keeps: the reason and how it ended, never its message (a crash's message is the end of its
# log, which may print anything the container held)
_STATE_KEYS = ("reason", "exitCode", "signal")


def _container_status(item):
    if not isinstance(item, dict):
        return item
    kept = dict((k, item[k]) for k in ("name", "ready", "started", "restartCount") if k in item)
    for key in ("state", "lastState"):
        if isinstance(item.get(key), dict):
            kept[key] = dict((kind, dict((k, v) for k, v in (detail or {}).items() if k in _STATE_KEYS))
                             for kind, detail in item[key].items() if isinstance(detail, dict) or detail is None)
    return kept


def _pod_status(status):
    """A pod's phase, its conditions (type, status, reason) and its containers' readiness and states (reasons, exit codes)."""
    kept = dict((k, status[k]) for k in ("phase",) if k in status)
    if isinstance(status.get("conditions"), list):
        kept["conditions"] = [dict((k, v) for k, v in c.items() if k in ("type", "status", "reason")) if isinstance(c, dict) else c
                              for c in status["conditions"]]
    for key in ("containerStatuses", "initContainerStatuses"):
        if isinstance(status.get(key), list):
            kept[key] = [_container_status(c) for c in status[key]]
    return kept


def _resources(read):
    """The ``resources`` of a k8s_info result, or None when the read failed or did not run."""
    if read is None or not isinstance(read, dict):
        return None if read is None else read
    if read.get("failed") or read.get("skipped") or "resources" not in read:
        return None
    return read["resources"]


_API_BODY = "HTTP response body:"


def _api_status(text):
    """``<code> <reason>: <message>`` of the API server's Status object in a kubernetes client error, or None."""
    if _API_BODY not in text:
        return None
    try:
        status = json.JSONDecoder().raw_decode(text[text.find("{", text.find(_API_BODY)):])[0]
    except ValueError:
        return None
    if not isinstance(status, dict) or status.get("kind") != "Status":
        return None
    return "%s %s: %s" % (status.get("code"), status.get("reason"), status.get("message"))


def _read_error(read):
    """Why a k8s_info read gave nothing (the API server's Status, else its message; shortened), or None."""
    if read is None:
        return "not read"
    if isinstance(read, dict) and (read.get("failed") or read.get("skipped") or "resources" not in read):
        text = str(read.get("msg") or ("skipped" if read.get("skipped") else "no resources returned"))
        return " ".join((_api_status(text) or text).split())[:300]
    return None


def _requests_gpus(pod):
    try:
        return bool(pod_gpu_requests(pod))
    except ValueError:
        return True     # a malformed GPU request is for the checks to report


def _on_nodes(pods, node_names):
    """The pods on GPU nodes, and the unscheduled pods that request GPUs."""
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") in node_names
            or (not (p.get("spec") or {}).get("nodeName") and _requests_gpus(p))]


def _network_object(doc):
    """A GKENetworkParamSet or Network: its name, spec and status (no annotation, no managed fields)."""
    return dict(apiVersion=doc.get("apiVersion"), kind=doc.get("kind"), metadata=dict(name=(doc.get("metadata") or {}).get("name")),
                spec=copy.deepcopy(doc.get("spec") or {}), status=copy.deepcopy(doc.get("status") or {}))


def _resource_slice(doc):
    """A ResourceSlice: its name, driver, node and pool, and how many devices it publishes (not the devices)."""
    spec = doc.get("spec") or {}
    devices = spec.get("devices")
    # a slice kept here (a snapshot file read back) already holds the count
    count = devices if isinstance(devices, int) and not isinstance(devices, bool) else len(devices if isinstance(devices, list) else [])
    return dict(metadata=dict(name=(doc.get("metadata") or {}).get("name")),
                spec=dict(driver=spec.get("driver"), nodeName=spec.get("nodeName"), pool=copy.deepcopy(spec.get("pool")),
                          devices=count))


# a daemon log line keeps at most this much: it is evidence, not the log
_LOG_LINE = 300
_LOG_LINES = 20


def cause_lines(text):
    """The lines of a ComputeDomain daemon's log that name a known cause (the catalog's), shortened: nothing else of
    the log is kept."""
    patterns = [re.compile(c["pattern"]) for c in dra_driver.DAEMON_LOG_CAUSES]
    lines = [" ".join(line.split())[:_LOG_LINE] for line in str(text or "").splitlines() if any(p.search(line) for p in patterns)]
    return lines[-_LOG_LINES:]


def _daemon_log(doc):
    return dict(pod=doc.get("pod"), namespace=doc.get("namespace"), node=doc.get("node"),
                lines=[" ".join(str(line).split())[:_LOG_LINE] for line in (doc.get("lines") or [])][-_LOG_LINES:])


def compute_domain_daemons(snapshot):
    """The ComputeDomain daemon pods (a container named as the catalog's) that are not Running with every container
    ready: [dict(namespace, pod, node, container)], the pods whose logs say why their domain is NotReady."""
    daemons = []
    for pod in (snapshot.get("kubernetes") or {}).get("pods") or []:
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
        if not any(c.get("name") == dra_driver.DAEMON_CONTAINER for c in spec.get("containers") or []):
            continue
        ready = status.get("phase") == "Running" and all(c.get("ready") for c in status.get("containerStatuses") or [{}])
        if not ready:
            daemons.append(dict(namespace=meta.get("namespace"), pod=meta.get("name"), node=spec.get("nodeName"),
                                container=dra_driver.DAEMON_CONTAINER))
    return daemons


def with_daemon_logs(snapshot, logs):
    """A copy of ``snapshot`` with the cause lines of the daemons' logs (``logs``: [dict(namespace, pod, node, log)],
    a log that could not be read has none) as ``kubernetes.compute_domain_daemon_logs``."""
    result = copy.deepcopy(snapshot)
    kept = [dict(namespace=e.get("namespace"), pod=e.get("pod"), node=e.get("node"), lines=cause_lines(e.get("log")))
            for e in logs or []]
    result.setdefault("kubernetes", {})["compute_domain_daemon_logs"] = kept
    return result


def _kept(documents, scrub):
    """``documents`` scrubbed, without any Secret; None (not read), or anything that is not a list, as it is."""
    if not isinstance(documents, list):
        return documents
    return [scrub(d) if isinstance(d, dict) else d for d in documents if not (isinstance(d, dict) and is_secret_kind(d.get("kind")))]


def _kubernetes(collections):
    """The ``kubernetes`` part of a snapshot from the collections read (lists of objects; None: not read). Pods are
    kept only on GPU nodes (and pending ones that ask for GPUs)."""
    nodes, pods = _kept(collections.get("nodes"), scrub_object), collections.get("pods")
    gpu_node_names = set(node_name(n) for n in nodes if isinstance(n, dict) and is_gpu_node(n)) if isinstance(nodes, list) else set()
    if isinstance(pods, list):
        pods = _on_nodes([p for p in pods if isinstance(p, dict)], gpu_node_names)
    kept = dict(nodes=nodes, pods=_kept(pods, scrub_pod))
    kept.update((k, _kept(collections.get(k), scrub_object)) for k in ("daemonsets", "cluster_policies", "nic_cluster_policies"))
    kept.update((k, _kept(collections.get(k), _network_object)) for k in ("network_param_sets", "networks"))
    kept.update(resource_slices=_kept(collections.get("resource_slices"), _resource_slice),
                compute_domains=_kept(collections.get("compute_domains"), scrub_object),
                compute_domain_daemon_logs=_kept(collections.get("compute_domain_daemon_logs"), _daemon_log))
    return kept


_PARTED_KEY = "config.yaml"    # the key of the MIG manager's mig-parted ConfigMaps (role mig_manager reads the same)


def mig_parted(document):
    """(dict(source, config), None) of the MIG manager's mig-parted config given as its ConfigMap (``data`` key
    ``config.yaml``) or as the mig-parted document itself; (None, why) when it is neither."""
    if isinstance(document, dict) and document.get("kind") == "ConfigMap":
        meta = document.get("metadata") or {}
        source = "ConfigMap %s/%s" % (meta.get("namespace"), meta.get("name"))
        text = (document.get("data") or {}).get(_PARTED_KEY)
        if text is None:
            return None, "%s has no %s key" % (source, _PARTED_KEY)
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return None, "%s: %s is not YAML: %s" % (source, _PARTED_KEY, " ".join(str(exc).split()))
    else:
        source = "the mig-parted config"
    if not isinstance(document, dict) or document.get("version") != "v1" or not isinstance(document.get("mig-configs"), dict):
        return None, "%s is not a mig-parted config (version: v1 with mig-configs)" % source
    return dict(source=source, config=copy.deepcopy(document)), None


def build_kubernetes(name, nodes, daemonsets, pods, cluster_policies=None, nic_cluster_policies=None,
                     network_param_sets=None, networks=None, gke=None, captured_at=None, mig_parted_config=None,
                     resource_slices=None, compute_domains=None):
    """A Kubernetes snapshot from k8s_info results (or lists of documents); pods are kept only on GPU nodes.
    ``mig_parted_config``: the MIG manager's mig-parted ConfigMap (or document) that custom MIG configs are judged by."""
    reads = dict(nodes=nodes, daemonsets=daemonsets, pods=pods, cluster_policies=cluster_policies,
                 nic_cluster_policies=nic_cluster_policies, network_param_sets=network_param_sets, networks=networks,
                 resource_slices=resource_slices, compute_domains=compute_domains)
    # the DRA reads are optional arguments: a caller that does not pass them has no DRA objects to report as unread
    errors = dict(("kubernetes." + k, _read_error(v)) for k, v in reads.items()
                  if _read_error(v) and not (v is None and k in ("resource_slices", "compute_domains")))
    collections = dict((k, _resources(v)) for k, v in reads.items())
    snapshot = dict(format=FORMAT, version=VERSION, target=dict(name=name, kind="kubernetes"), captured_at=captured_at,
                    kubernetes=_kubernetes(collections))
    if gke:
        gke = copy.deepcopy(gke)
        # the GKE reads' failures (the info modules' messages) join the Kubernetes ones
        errors.update((k, " ".join(str(v).split())[:300]) for k, v in (gke.pop("read_errors", None) or {}).items()
                      if v and gke.get(k.split(".", 1)[1]) is None)
        snapshot["gke"] = gke
    if mig_parted_config:
        snapshot["mig_parted"], error = mig_parted(mig_parted_config)
        if error:
            errors["mig_parted"] = error
    if errors:
        snapshot["read_errors"] = errors
    return snapshot


def build_host(name, facts, captured_at=None):
    """A host snapshot from gpu_host_facts' ``gpu_host`` fact."""
    return dict(format=FORMAT, version=VERSION, target=dict(name=name, kind="host"), captured_at=captured_at,
                host=copy.deepcopy(facts))


# the parts of a snapshot besides target and kubernetes (performance: the probes' outputs, see roles/validate)
_PARTS = ("format", "version", "captured_at", "gke", "mig_parted", "host", "health", "performance", "read_errors")


def _no_secrets(value):
    """A copy of ``value`` without any Secret object, at any depth."""
    if isinstance(value, dict):
        return dict((k, _no_secrets(v)) for k, v in value.items() if not (isinstance(v, dict) and is_secret_kind(v.get("kind"))))
    if isinstance(value, list):
        return [_no_secrets(v) for v in value if not (isinstance(v, dict) and is_secret_kind(v.get("kind")))]
    return value


def loaded(document):
    """A snapshot read from a file (one this collection wrote, or one a user sent), reduced to what a snapshot built
    here keeps: the known parts only, every object scrubbed as at read time, no Secret at any depth. ValueError when
    the document is not a snapshot."""
    problems = snapshot_problems(document)
    if problems:
        raise ValueError("not a validation snapshot: " + "; ".join(problems))
    kept = dict((k, _no_secrets(document[k])) for k in _PARTS if k in document)
    kept["target"] = dict(name=document["target"]["name"], kind=document["target"]["kind"])
    if isinstance(document.get("kubernetes"), dict):
        collections = dict((k, document["kubernetes"].get(k)) for k in KUBERNETES_KEYS)
        # a collection that is not a list was not captured: its checks end as other, saying so (and it is not shown)
        malformed = dict(("kubernetes." + k, "the snapshot file holds %s here, not a list" % type(v).__name__)
                         for k, v in collections.items() if v is not None and not isinstance(v, list))
        if malformed:
            kept["read_errors"] = dict(kept.get("read_errors") or {}, **malformed)
        kept["kubernetes"] = _kubernetes(dict((k, None if "kubernetes." + k in malformed else v) for k, v in collections.items()))
    elif "kubernetes" in document:
        kept["kubernetes"] = document["kubernetes"]
    return kept


def snapshot_problems(snapshot):
    """Why a document is not a snapshot this collection reads; [] when it is."""
    if not isinstance(snapshot, dict):
        return ["a snapshot is a mapping, got %s" % type(snapshot).__name__]
    problems = []
    if snapshot.get("format") != FORMAT:
        problems.append("format is %r, expected %r" % (snapshot.get("format"), FORMAT))
    if snapshot.get("version") != VERSION:
        problems.append("version is %r, this collection reads version %d" % (snapshot.get("version"), VERSION))
    target = snapshot.get("target")
    if not isinstance(target, dict) or target.get("kind") not in KINDS or not target.get("name"):
        problems.append("target must have a name and a kind (%s)" % ", ".join(KINDS))
    return problems


# --------------------------------------------------------------------------------------------
# Reading a snapshot
# --------------------------------------------------------------------------------------------

def node_name(node):
    return (node.get("metadata") or {}).get("name")


def node_labels(node):
    return (node.get("metadata") or {}).get("labels") or {}


_GPU_RESOURCE = re.compile(r"^(nvidia\.com/(gpu|mig-)|aliyun\.com/gpu-)")


def is_gpu_node(node):
    """A node with an NVIDIA GPU: it advertises a GPU resource, or its labels name an accelerator / GPU."""
    labels = node_labels(node)
    if labels.get("cloud.google.com/gke-accelerator") or labels.get("nvidia.com/gpu.present") == "true":
        return True
    status = node.get("status") or {}
    return any(_GPU_RESOURCE.match(k) for k in list((status.get("capacity") or {})) + list((status.get("allocatable") or {})))


class View(object):
    """What the checks read a snapshot through: ``need`` a path or the check ends as other."""

    def __init__(self, snapshot):
        problems = snapshot_problems(snapshot)
        if problems:
            raise ValueError("not a validation snapshot: " + "; ".join(problems))
        self.snapshot = snapshot
        self.touched = set()

    @property
    def kind(self):
        return self.snapshot["target"]["kind"]

    def has(self, path):
        try:
            self.need(path)
        except Missing:
            return False
        return True

    def need(self, path):
        """The value at a dotted path; Missing when it was not captured or its read failed (null)."""
        self.touched.add(path)
        value = self.snapshot
        for part in path.split("."):
            if not isinstance(value, dict) or value.get(part) is None:
                why = (self.snapshot.get("read_errors") or {}).get(path)
                if why is None and path.startswith("gke.") and self.snapshot.get("gke") is None:
                    why = "the GKE API was not read: validate_gke is not set"
                raise Missing(path, why)
            value = value[part]
        return value

    def kubernetes(self, what):
        """A Kubernetes collection; Skip on a host target, Missing when not captured."""
        if self.kind != "kubernetes":
            raise Skip("the target is a %s, not a Kubernetes cluster" % self.kind)
        return self.need("kubernetes." + what)

    def host(self):
        if self.kind != "host":
            raise Skip("the target is a Kubernetes cluster; host checks run on the inventory's GPU hosts")
        return self.need("host")

    def gpu_nodes(self):
        return [n for n in self.kubernetes("nodes") if is_gpu_node(n)]

    def pods_on(self, names):
        names = set(names)
        return [p for p in self.kubernetes("pods") if (p.get("spec") or {}).get("nodeName") in names]


# --------------------------------------------------------------------------------------------
# Comparing two snapshots
# --------------------------------------------------------------------------------------------

def _by_name(documents, namespaced=False):
    found = {}
    for doc in documents or []:
        meta = doc.get("metadata") or {}
        found["%s/%s" % (meta.get("namespace"), meta.get("name")) if namespaced else meta.get("name")] = doc
    return found


def _node_facts(node):
    status = node.get("status") or {}
    return dict(labels=node_labels(node), kubelet=(status.get("nodeInfo") or {}).get("kubeletVersion"),
                gpus=dict((k, v) for k, v in (status.get("allocatable") or {}).items() if _GPU_RESOURCE.match(k)))


def _changes(where, old, new):
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append("%s: %s %s -> %s" % (where, key, old.get(key, "(none)"), new.get(key, "(none)")))
    return lines


def _images(doc):
    spec = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return sorted(c.get("image") or "" for c in (spec.get("initContainers") or []) + (spec.get("containers") or []))


def diff(old, new):
    """What changed between two snapshots of one target, as lines: nodes added or removed, node labels, kubelet
    version and GPU resources, DaemonSets added, removed or with other images, operator policy states."""
    for which, snapshot in (("old", old), ("new", new)):
        problems = snapshot_problems(snapshot)
        if problems:
            raise ValueError("the %s snapshot: %s" % (which, "; ".join(problems)))
    lines = []
    if old["target"] != new["target"]:
        lines.append("target: %s -> %s" % (old["target"], new["target"]))
    k_old, k_new = old.get("kubernetes") or {}, new.get("kubernetes") or {}
    nodes_old, nodes_new = _by_name(k_old.get("nodes")), _by_name(k_new.get("nodes"))
    lines += ["node %s removed" % n for n in sorted(set(nodes_old) - set(nodes_new))]
    lines += ["node %s added" % n for n in sorted(set(nodes_new) - set(nodes_old))]
    for name in sorted(set(nodes_old) & set(nodes_new)):
        before, after = _node_facts(nodes_old[name]), _node_facts(nodes_new[name])
        lines += _changes("node %s label" % name, before["labels"], after["labels"])
        lines += _changes("node %s allocatable" % name, before["gpus"], after["gpus"])
        if before["kubelet"] != after["kubelet"]:
            lines.append("node %s: kubelet %s -> %s" % (name, before["kubelet"], after["kubelet"]))
    ds_old, ds_new = _by_name(k_old.get("daemonsets"), True), _by_name(k_new.get("daemonsets"), True)
    lines += ["DaemonSet %s removed" % n for n in sorted(set(ds_old) - set(ds_new))]
    lines += ["DaemonSet %s added" % n for n in sorted(set(ds_new) - set(ds_old))]
    lines += ["DaemonSet %s: images %s -> %s" % (n, ", ".join(_images(ds_old[n])), ", ".join(_images(ds_new[n])))
              for n in sorted(set(ds_old) & set(ds_new)) if _images(ds_old[n]) != _images(ds_new[n])]
    for key in ("cluster_policies", "nic_cluster_policies"):
        p_old, p_new = _by_name(k_old.get(key)), _by_name(k_new.get(key))
        for name in sorted(set(p_old) | set(p_new)):
            states = [((p.get(name) or {}).get("status") or {}).get("state") if name in p else "(none)" for p in (p_old, p_new)]
            if states[0] != states[1]:
                lines.append("%s %s: state %s -> %s" % (key.replace("_", " ")[:-3] + "y", name, states[0], states[1]))
        for name in sorted(set(p_old) & set(p_new)):
            lines += _changes("%s %s" % (key.replace("_", " ")[:-3] + "y", name), _versions(p_old[name]), _versions(p_new[name]))
    lines += _gke_changes(old.get("gke") or {}, new.get("gke") or {})
    lines += _changes("host", dict((k, v) for k, v in (old.get("host") or {}).items() if k in _HOST_KEYS),
                      dict((k, v) for k, v in (new.get("host") or {}).items() if k in _HOST_KEYS))
    return lines


def _versions(policy):
    """{component.version: value} of an operator policy's spec (the versions an operator upgrade changes)."""
    spec = policy.get("spec") or {}
    return dict(("%s.version" % name, part["version"]) for name, part in sorted(spec.items())
                if isinstance(part, dict) and part.get("version") not in (None, ""))


def _gke_changes(old, new):
    """The GKE control plane's version and each node pool's version (added and removed pools are nodes' lines)."""
    lines = []
    versions = [(g.get("cluster") or {}).get("current_master_version") for g in (old, new)]
    if versions[0] != versions[1] and None not in versions:
        lines.append("GKE control plane: %s -> %s" % tuple(versions))
    pools = [dict((p.get("name"), p) for p in g.get("node_pools") or [] if isinstance(p, dict)) for g in (old, new)]
    for name in sorted(set(pools[0]) & set(pools[1])):
        lines += _changes("GKE node pool %s" % name, dict((k, pools[0][name].get(k)) for k in _POOL_KEYS if k in pools[0][name]),
                          dict((k, pools[1][name].get(k)) for k in _POOL_KEYS if k in pools[1][name]))
    return lines


_POOL_KEYS = ("version", "image_type", "machine_type")


_HOST_KEYS = ("driver_version", "cuda_version", "kernel_version")
