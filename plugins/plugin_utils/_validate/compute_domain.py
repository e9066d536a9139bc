# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The ComputeDomain checks (multi-node NVLink through IMEX, the NVIDIA DRA driver for GPUs): the clique nodes publish
the driver's channels, every ComputeDomain is Ready (and, when not, which node and what its daemons' logs say), and a
probe pod that claims a channel sees exactly one IMEX channel.

They judge only where there is something to judge: a cluster without a Ready node that carries the clique label has no
multi-node NVLink domain, and each check is ``skipped`` with that reason.

Snapshot shape read (besides nodes)::

    kubernetes:
      resource_slices: [{metadata: {name}, spec: {driver, nodeName, pool, devices: <count>}}]
      compute_domains: [ComputeDomain objects: metadata, spec, status {status, nodes: [{name, ipAddress, cliqueID, index, status}]}]
      compute_domain_daemon_logs: [{pod, namespace, node, lines}]     (the cause lines of the daemons not ready)
    health:
      imex_channel: {nodes: {<node>: {output, rc, error}}, skipped, error}   (the health phase's channel probe)
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver as _catalog
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Fault, Missing, Skip, described_by, probe_record
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels, node_name

# each check's phase, title, reads, cause and fix: compute_domain.yml beside this file
described = described_by(__file__)

_CHANNEL = re.compile(r"^channel\d+\Z")


def _ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def clique_nodes(nodes):
    """{node name: clique} of the Ready nodes that carry a non-empty clique label."""
    return dict((node_name(n), node_labels(n)[_catalog.CLIQUE_LABEL]) for n in nodes
                if node_labels(n).get(_catalog.CLIQUE_LABEL) and _ready(n))


# what the role lists on a cluster with a clique node (rights: roles/validate/files/compute-domain-clusterrole.yaml)
DRA_READS = (
    dict(key="resource_slices", api_version="resource.k8s.io/v1", kind="ResourceSlice"),
    dict(key="compute_domains", api_version="%s/%s" % (_catalog.COMPUTE_DOMAIN["group"], _catalog.COMPUTE_DOMAIN["version"]),
         kind=_catalog.COMPUTE_DOMAIN["kind"]),
)


def dra_reads(nodes):
    """The reads of the DRA driver's objects (key, api_version, kind) when a Ready node carries the clique label, else
    none: a cluster without multi-node NVLink has nothing there to judge, and is not asked for it."""
    return [dict(r) for r in DRA_READS] if clique_nodes([n for n in nodes or [] if isinstance(n, dict)]) else []


def _cliques(view):
    """The clique nodes; Skip when there is none (nothing runs multi-node NVLink here)."""
    nodes = view.kubernetes("nodes")
    found = clique_nodes(nodes)
    if not found:
        raise Skip("not applicable: no Ready node carries the %s label (%d node(s) read), so no multi-node NVLink "
                   "domain exists to judge" % (_catalog.CLIQUE_LABEL, len(nodes)))
    return found


@described("compute_domain.slices")
def slices(view):
    cliques = _cliques(view)
    published = set((s.get("spec") or {}).get("nodeName") for s in view.kubernetes("resource_slices")
                    if (s.get("spec") or {}).get("driver") == _catalog.COMPUTE_DOMAIN_DRIVER)
    problems = ["node %s (clique %s) publishes no %s ResourceSlice" % (name, cliques[name], _catalog.COMPUTE_DOMAIN_DRIVER)
                for name in sorted(cliques) if name not in published]
    evidence = ["%d clique node(s), %d with a %s ResourceSlice" % (
        len(cliques), len(set(cliques) & published), _catalog.COMPUTE_DOMAIN_DRIVER)]
    return evidence, problems


def _node_text(entry):
    return "%s (%s, clique %s, index %s) %s" % (entry.get("name"), entry.get("ipAddress") or "no address",
                                                entry.get("cliqueID") or "?", entry.get("index", "?"), entry.get("status") or "no status")


def _causes(view, nodes):
    """[(cause entry, log entry, line)] of the daemon logs on ``nodes`` (every daemon log when ``nodes`` is empty), and
    whether the logs were read at all."""
    logs = (view.snapshot.get("kubernetes") or {}).get("compute_domain_daemon_logs")
    if logs is None:
        return [], False
    found = []
    for entry in logs:
        if nodes and entry.get("node") not in nodes:
            continue
        for cause in _catalog.DAEMON_LOG_CAUSES:
            line = next((ln for ln in entry.get("lines") or [] if re.search(cause["pattern"], ln)), None)
            if line is not None:
                found.append((cause, entry, line))
    return found, True


@described("compute_domain.ready")
def ready(view):
    _cliques(view)
    domains = view.kubernetes("compute_domains")
    if not domains:
        raise Skip("no ComputeDomain exists: a multi-node NVLink job creates its own (the compute_domain filter), and the "
                   "health phase's IMEX probe creates and removes one")
    evidence, problems = [], []
    for domain in domains:
        meta, status = domain.get("metadata") or {}, domain.get("status") or {}
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        members = [n for n in status.get("nodes") or [] if isinstance(n, dict)]
        state = status.get("status")
        if state == "Ready":
            evidence.append("ComputeDomain %s Ready on %d node(s)" % (name, len(members)))
            continue
        what = ("ComputeDomain %s is %s; status.nodes: %s" % (name, state, "; ".join(_node_text(n) for n in members) or "none")
                if state else "ComputeDomain %s has no status: the DRA driver's controller has not judged it" % name)
        not_ready = set(n.get("name") for n in members if n.get("status") != "Ready")
        causes, read = _causes(view, not_ready)
        if causes:
            for cause, entry, line in causes:
                problems.append(Fault("%s: %s (daemon pod %s on node %s: %s)" % (
                    what, cause["cause"], entry.get("pod"), entry.get("node"), line), cause["name"]))
        else:
            problems.append("%s; %s" % (what, "no daemon log names a known cause" if read else "the daemons' logs were not read"))
    return evidence, problems


def _imex_section(view):
    health = view.snapshot.get("health")
    if health is None:
        raise Skip("the snapshot holds no health probe output: the IMEX probe runs against a live cluster "
                   "(validate_phases with health, no validate_snapshot)")
    section = probe_record("health", health, "imex_channel")
    nodes = section.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise Missing("health.imex_channel.nodes", "the probe recorded no node")
    return nodes


@described("compute_domain.imex_channel")
def imex_channel(view):
    nodes = _imex_section(view)
    evidence, problems, undecided = [], [], []
    for node in sorted(nodes):
        record = nodes[node] or {}
        if record.get("error"):
            undecided.append("node %s: %s" % (node, record["error"]))
            continue
        channels = sorted(line.strip() for line in str(record.get("output") or "").splitlines() if _CHANNEL.match(line.strip()))
        if len(channels) == 1:
            evidence.append("node %s: %s/%s" % (node, _catalog.IMEX_CHANNEL_DIR, channels[0]))
        else:
            problems.append("node %s: the probe pod sees %d IMEX channels under %s (%s); exactly one is expected" % (
                node, len(channels), _catalog.IMEX_CHANNEL_DIR, ", ".join(channels) or "none"))
    if problems:
        return evidence + ["cannot decide: %s" % u for u in undecided], problems
    if undecided:
        raise Missing("health.imex_channel", "; ".join(undecided))
    return evidence, problems
