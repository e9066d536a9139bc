# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""GKE input checks and small helpers shared by the GKE cluster, node-pool and multinetwork engines.

Every check appends ``"<option>: <problem>"`` to a ``_problems.Problems`` list (the cloud-neutral
checks, node labels and taints included, live in ``_problems``).
"""

from __future__ import annotations

import datetime
import ipaddress
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import parse_gke_version
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import parse_taints as parse_node_taints
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import taint_text as node_taint_text


def _lowercase_name(longest):
    """(pattern, rule) of a name of 1 to ``longest`` lowercase letters, digits and hyphens that starts with a letter
    and does not end with a hyphen: the naming rule GKE and Compute Engine share, each with its own longest length."""
    return (re.compile(r"^[a-z](?:[-a-z0-9]{0,%d}[a-z0-9])?\Z" % (longest - 2)),
            "1 to %d lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen" % longest)


# Every pattern ends in \Z, not $: $ also matches before a trailing newline, which is no part of a name.
# GKE cluster and node pool names: at most 40 characters.
GKE_NAME, GKE_NAME_RULE = _lowercase_name(40)
# Compute Engine resource names (networks, subnetworks, reservations, resource policies): RFC 1035, <= 63.
GCE_NAME, GCE_NAME_RULE = _lowercase_name(63)
# Compute Engine machine types: predefined (a3-megagpu-8g, e2-medium) or custom (n2-custom-8-32768[-ext]):
# a resource name with at least one hyphen
MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+\Z")
# Persistent Disk and Hyperdisk types (pd-balanced, pd-ssd, hyperdisk-balanced, ...)
DISK_TYPE = re.compile(r"^(?:pd|hyperdisk)-[a-z]+\Z")
# GKE node image types (COS_CONTAINERD, UBUNTU_CONTAINERD, ...); the API takes either case
IMAGE_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*\Z")
_REGION = r"[a-z]+-[a-z]+[0-9]+"
REGION = re.compile(r"^%s\Z" % _REGION)
# a zone is its region and a letter
ZONE = re.compile(r"^(%s)-[a-z]\Z" % _REGION)
# a project ID (6-30 characters), optionally domain-scoped (example.com:my-project), 63 characters at most
PROJECT = re.compile(r"^(?=.{6,63}\Z)(?:[a-z][-a-z0-9.]*[a-z0-9]:)?[a-z][-a-z0-9]{4,28}[a-z0-9]\Z")
SERVICE_ACCOUNT = re.compile(r"^(?:default|[a-z][-a-z0-9]{4,28}[a-z0-9]@[-a-z0-9.:]+\.(?:iam\.)?gserviceaccount\.com"
                             r"|[0-9]+-compute@developer\.gserviceaccount\.com)\Z")

TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
TAINT_EFFECT_NAMES = dict((v, k) for k, v in TAINT_EFFECTS.items())

# Operations of GKE run one at a time per cluster; these statuses mean "wait, then look again".
BUSY_CLUSTER_STATUSES = ("PROVISIONING", "RECONCILING", "STOPPING")
BUSY_POOL_STATUSES = ("PROVISIONING", "RECONCILING", "STOPPING")


def check_name(problems, option, value, pattern=GKE_NAME, what=GKE_NAME_RULE):
    if value is None:
        return
    if not pattern.match(value):
        problems.add(option, "%r is not a valid name (%s)" % (value, what))


def check_gce_name(problems, option, value):
    check_name(problems, option, value, GCE_NAME, GCE_NAME_RULE)


def check_node_types(problems, prefix, machine_type=None, disk_type=None, image_type=None, accelerator_type=None):
    """Syntax of a node's machine, disk, image and accelerator types (``prefix``: ``""`` or ``"default_node_pool."``).

    Whether the zone offers them is a preflight read (``_gcp.offers``); this only refuses what no zone could.
    """
    for option, value, pattern, rule in (
            ("machine_type", machine_type, MACHINE_TYPE,
             "a Compute Engine machine type such as a3-megagpu-8g, g2-standard-8 or n2-custom-8-32768 (at most 63 "
             "lowercase letters, digits and hyphens)"),
            ("disk_type", disk_type, DISK_TYPE, "a disk type such as pd-balanced, pd-ssd or hyperdisk-balanced"),
            ("image_type", image_type, IMAGE_TYPE, "a GKE image type such as COS_CONTAINERD or UBUNTU_CONTAINERD"),
            ("accelerator_type", accelerator_type, GCE_NAME,
             "a Compute Engine accelerator type such as nvidia-l4 or nvidia-h100-mega-80gb")):
        if value is None:
            continue
        text = "%s" % (value,)
        if len(text) > 63 or not pattern.match(text):
            problems.add(prefix + option, "%r is not %s" % (value, rule))


def check_project(problems, value):
    if value is not None and not PROJECT.match(value):
        problems.add("project", "%r is not a valid Google Cloud project ID" % (value,))


def location_kind(location):
    """``zone`` or ``region`` for a GKE location, else None."""
    if ZONE.match(location or ""):
        return "zone"
    if REGION.match(location or ""):
        return "region"
    return None


def region_of(location):
    """The region of a zone or region name."""
    match = ZONE.match(location or "")
    return match.group(1) if match else location


def check_location(problems, value, option="location"):
    if value is None:
        return
    if location_kind(value) is None:
        problems.add(option, "%r is neither a zone (for example us-central1-c) nor a region (for example us-central1)"
                     % (value,))


def check_node_locations(problems, option, zones, location):
    if zones is None:
        return
    if not zones:
        problems.add(option, "must name at least one zone when set")
        return
    if len(set(zones)) != len(zones):
        problems.add(option, "lists a zone more than once: %s" % ", ".join(zones))
    for zone in zones:
        if not ZONE.match(zone or ""):
            problems.add(option, "%r is not a zone (for example us-central1-c)" % (zone,))
        elif location and location_kind(location) and region_of(zone) != region_of(location):
            problems.add(option, "zone %s is not in the region of location %s" % (zone, location))


def check_full_version(problems, option, value):
    """A pinned GKE version (MAJOR.MINOR.PATCH-gke.BUILD); returns the parsed tuple or None."""
    if value is None:
        return None
    try:
        return parse_gke_version(value)
    except ValueError as exc:
        problems.add(option, str(exc))
        return None


def version_key(value):
    """Sortable key of a GKE version, or None when it is not a full version."""
    try:
        return parse_gke_version(value)
    except ValueError:
        return None


def check_cidr(problems, option, value, max_prefix=None, min_prefix=None):
    """An IPv4 network in CIDR form without host bits; returns ipaddress.IPv4Network or None."""
    if value is None:
        return None
    try:
        network = ipaddress.ip_network(str(value), strict=True)
    except ValueError as exc:
        problems.add(option, "%r is not a valid CIDR block (%s)" % (value, exc))
        return None
    if network.version != 4:
        problems.add(option, "%r is not an IPv4 CIDR block" % (value,))
        return None
    if "/" not in str(value):
        problems.add(option, "%r has no prefix length (write it as a.b.c.d/n)" % (value,))
        return None
    if max_prefix is not None and network.prefixlen > max_prefix:
        problems.add(option, "%s is too small: the prefix length must be at most /%d" % (value, max_prefix))
    if min_prefix is not None and network.prefixlen < min_prefix:
        problems.add(option, "%s is too large: the prefix length must be at least /%d" % (value, min_prefix))
    return network


def check_no_overlap(problems, named_networks):
    """``named_networks``: [(option, IPv4Network or None)]; one problem per overlapping pair."""
    known = [(option, net) for option, net in named_networks if net is not None]
    for index, (option, net) in enumerate(known):
        for other_option, other in known[index + 1:]:
            if net.overlaps(other):
                problems.add(option, "%s overlaps %s (%s)" % (net, other_option, other))


def parse_taints(problems, option, taints):
    """``key=value:Effect`` strings -> NodeTaint documents of the container API (None when taints is None)."""
    parsed = parse_node_taints(problems, option, taints)
    if parsed is None:
        return None
    return [dict(taint, effect=TAINT_EFFECTS[taint["effect"]]) for taint in parsed]


def taint_text(taint):
    """A NodeTaint document as ``key=value:Effect``."""
    return node_taint_text(dict(taint, effect=TAINT_EFFECT_NAMES.get(taint.get("effect"), taint.get("effect"))))


def parse_time(problems, option, value):
    """An RFC 3339 timestamp with a time zone -> aware datetime (None when bad or unset)."""
    if value is None:
        return None
    parsed = to_datetime(value)
    if parsed is None:
        problems.add(option, "%r is not an RFC 3339 time with a zone, for example 2026-01-31T00:00:00Z" % (value,))
    return parsed


def to_datetime(value):
    text = "%s" % (value,)
    if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\Z", text):
        return None
    text = text[:-1] + "+00:00" if text.endswith("Z") else text
    # Python < 3.11 fromisoformat wants 0, 3 or 6 fraction digits
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)\.(\d+)(.*)\Z", text)
    if match:
        text = "%s.%s%s" % (match.group(1), (match.group(2) + "000000")[:6], match.group(3))
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def rfc3339(moment):
    """An aware datetime as the UTC RFC 3339 text GKE returns (``2026-01-31T00:00:00Z``)."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_segment(value):
    """``projects/p/global/networks/n`` or a full URL -> ``n``; names pass through."""
    if not value:
        return value
    return ("%s" % value).rstrip("/").rsplit("/", 1)[-1]


def cluster_path(project, location, cluster):
    return "projects/%s/locations/%s/clusters/%s" % (project, location, cluster)


def operation_error_text(exc):
    """A short text of an ApiError/OperationError (no headers, no secrets)."""
    describe = getattr(exc, "describe", None)
    return describe() if callable(describe) else "%s" % (exc,)
