# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPU-NIC fabric of one GKE cluster: one custom-mode VPC, one subnet and one firewall rule per GPU NIC
(TCPX, TCPXO), or, for the GPUDirect-RDMA profiles (A3 Ultra, A4, A4X), one extra gVNIC VPC (subnet and firewall
rule) plus one zonal RoCE VPC (created with the zone's ``vpc-roce`` network profile) holding one subnet per RDMA
NIC and no firewall rule (RoCE VPCs take no VPC firewall rules). The layout is the catalog's
(``_catalog/gke_gpudirect.py`` ``PROFILES[...]["layout"]``).

Flow of a run (module gke_multinetwork):

1. ``resolve`` checks every option and derives the fabric (names, CIDRs, MTUs, Kubernetes names) before
   anything is sent; every problem names its option.
2. ``FabricEngine.read`` reads every resource concurrently, each exactly once (3 x N for one VPC per NIC;
   N + 4 for RDMA: the gVNIC network, subnet and rule, the RoCE network and its N subnets).
3. ``plan_present`` / ``plan_absent`` compare and record the changes in a ``_plan.Plan``; drift that the
   API cannot fix (a moved or shrunk subnet range, a subnet or rule in another network, an auto-mode
   network) is collected and reported as one error before any change is made.
4. ``apply`` carries the plan out, network by network in parallel: the network first, then all its subnets
   and firewall rules together (critical path: two operation latencies). Deletion runs the other way round.
   ``concurrency`` bounds how many operations are in flight (1 = the guide's one-at-a-time loop).

Between 3 and 4, when the plan changes anything (and outside render mode), ``preflight`` reads the region
(and the zone, when ``location`` is one) once each, and for RDMA the zone's network profile (it exists, is
restricted to that zone and takes MRDMA NICs): what does not exist is refused before any network or firewall
rule is created (``_gcp.offers``). A no-op re-run reads nothing more than the fabric's resources.

A create that meets 409 (a run killed half-way, whose insert is still running or has finished) waits
until the resource is visible, then compares it like any other existing resource.

Rollback: when the service refuses a create as invalid (a 4xx answer to the insert other than 401, 403,
409 and 429) after this run created other resources, the resources this run created are deleted again
(leaves first, then networks) and the failure says so. Errors that the operation reports after the insert
was accepted (quota, capacity, internal errors) keep what was created: a re-run after the cause is fixed
converges without creating it again.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import threading

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import offers
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import checks as common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import Plan, differing_fields
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import WaitTimeout

NETWORK = "network"
SUBNETWORK = "subnetwork"
FIREWALL = "firewall"
API_GROUP = gpudirect.NETWORK_API_GROUP
API_VERSION = API_GROUP + "/v1"
DEFAULT_DEVICE_MODE = gpudirect.DEFAULT_DEVICE_MODE
# GPU NIC profiles this module builds (the catalog's, each with its fabric layout)
NETDEVICE_PROFILES = tuple(n for n in gpudirect.PROFILE_NAMES if gpudirect.PROFILES[n]["layout"] == "vpc-per-nic")
RDMA_PROFILES = tuple(n for n in gpudirect.PROFILE_NAMES if gpudirect.PROFILES[n]["layout"] == "rdma")
FABRIC_PROFILES = NETDEVICE_PROFILES + RDMA_PROFILES
MAX_NICS = 8
# every resource of the largest fabric (3 x 8) in flight at once: a higher bound cannot run faster
MAX_CONCURRENCY = 3 * MAX_NICS
DEFAULT_CONCURRENCY = 16
ANY_SOURCE = ("0.0.0.0/0",)
DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\Z")
FIREWALL_ALLOWED = [{"IPProtocol": "tcp"}, {"IPProtocol": "udp"}, {"IPProtocol": "icmp"}]
# a create refused with one of these is not "invalid input": no rollback (auth, quota, conflict, rate)
NOT_INVALID = (401, 403, 409, 429)

# The options that name a fabric's resources (doc fragment gke_multinetwork): gke_multinetwork and
# gke_multinetwork_info take the same ones, so the info module finds what the resource module made.
NAMING_SPEC = dict(
    cluster=dict(type="str", required=True),
    nic_count=dict(type="int"),
    # one entry per GPU NIC; every field falls back to the derived default
    networks=dict(type="list", elements="dict", options=dict(
        name=dict(type="str"), subnetwork=dict(type="str"), firewall=dict(type="str"), k8s_network=dict(type="str"),
        cidr=dict(type="str"), mtu=dict(type="int"),
    )),
    name_prefix=dict(type="str"),
    k8s_network_prefix=dict(type="str", default="vpc"),
    # the zone of the RoCE VPC's network profile (RDMA profiles); defaults to location when that is a zone
    zone=dict(type="str"),
)


class FabricError(Exception):
    """Input or state the module refuses, with a message naming the option or the resource field."""

    def __init__(self, message, problems=None, status=None):
        super().__init__(message)
        self.problems = list(problems or [])
        self.status = status


# ---------------------------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------------------------


def _nic_count(params, problems):
    profile_name = params.get("gpudirect")
    explicit = params.get("networks")
    count = params.get("nic_count")
    from_profile = None
    if profile_name is not None:
        if profile_name not in FABRIC_PROFILES:
            problems.add("gpudirect", "%r is not a GPUDirect profile with a GPU NIC fabric; allowed: %s" % (
                profile_name, ", ".join(FABRIC_PROFILES)))
            return None
        from_profile = gpudirect.profile(profile_name)["gpu_nic_count"]
    if count is not None and not 1 <= count <= MAX_NICS:
        problems.add("nic_count", "must be between 1 and %d, got %d" % (MAX_NICS, count))
        return None
    if from_profile is not None and count is not None and count != from_profile:
        problems.add("nic_count", "%d does not match gpudirect %s, which has %d GPU NICs" % (
            count, profile_name, from_profile))
        return None
    if explicit is not None:
        if not explicit:
            problems.add("networks", "must list at least one network when set")
            return None
        if len(explicit) > MAX_NICS:
            problems.add("networks", "lists %d networks; at most %d" % (len(explicit), MAX_NICS))
            return None
        expected = from_profile if from_profile is not None else count
        if expected is not None and len(explicit) != expected:
            problems.add("networks", "lists %d networks, but %s has %d GPU NICs" % (
                len(explicit), "gpudirect %s" % profile_name if from_profile is not None else "nic_count", expected))
            return None
        return len(explicit)
    if from_profile is not None:
        return from_profile
    if count is not None:
        return count
    problems.add("gpudirect", "set one of gpudirect (%s), nic_count or networks" % ", ".join(FABRIC_PROFILES))
    return None


def resolve(params):
    """The fabric the options describe: a dict with ``nics`` (one dict per GPU NIC) and shared settings.

    Raises FabricError listing every problem (option: problem) when the input is not valid.
    """
    problems = Problems()
    common.check_project(problems, params.get("project"))
    common.check_name(problems, "cluster", params.get("cluster"))
    location = params.get("location")
    region = common.region_of(location) if common.location_kind(location) else None
    if location is not None and region is None:
        problems.add("location", "%r is neither a region (for example us-central1) nor a zone (for example "
                                 "us-central1-c)" % (params["location"],))
    count = _nic_count(params, problems)
    profile_name = params.get("gpudirect")
    entry = gpudirect.PROFILES.get(profile_name) if profile_name in FABRIC_PROFILES else None
    rdma = entry is not None and entry["layout"] == "rdma"
    zone = _rdma_zone(problems, params, region) if rdma else None
    if rdma and params.get("networks") is not None:
        problems.add("networks", "is not used with gpudirect=%s: the gVNIC and RoCE VPCs' names derive from "
                                 "name_prefix and their ranges from cidr_base" % profile_name)
        count = None
    concurrency = params.get("concurrency")
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        problems.add("concurrency", "must be between 1 (one operation at a time) and %d (every resource of the "
                                    "largest fabric, 3 x %d NICs, at once), got %d" % (MAX_CONCURRENCY, MAX_NICS,
                                                                                       concurrency))
    default_mtu = params.get("mtu")
    if default_mtu is None:
        default_mtu = entry["mtu"] if entry else gpudirect.DEFAULT_MTU
    low, high = gpudirect.MTU_RANGE
    if not low <= default_mtu <= high:
        problems.add("mtu", "%d is outside the MTU range %d-%d of VPC networks" % (default_mtu, low, high))
    prefix = params.get("name_prefix") or "%s-gpunic" % params.get("cluster")
    k8s_prefix = params.get("k8s_network_prefix") or "vpc"
    base = common.check_cidr(problems, "cidr_base", params.get("cidr_base") or "192.168.0.0/16", max_prefix=29,
                             min_prefix=8)
    length = params.get("subnet_prefix_length") or 24
    if not 8 <= length <= 29:
        problems.add("subnet_prefix_length", "must be between 8 and 29 (subnet sizes GCE accepts), got %d" % length)
    elif base is not None and length < base.prefixlen:
        problems.add("subnet_prefix_length", "/%d is larger than cidr_base %s" % (length, base))
    if count is None:
        raise FabricError(problems.message("gke_multinetwork"), problems.items)

    explicit = params.get("networks") or [{} for dummy in range(count)]
    nics = []
    if rdma:
        nics = _rdma_nics(params, entry, prefix, count, default_mtu, zone)
    for index in range(count if not rdma else 0):
        given = explicit[index] or {}
        option = "networks[%d]" % index if params.get("networks") else None
        number = index + 1
        nic = dict(
            index=number,
            network=given.get("name") or "%s-%d" % (prefix, number),
            subnetwork=given.get("subnetwork") or "%s-%d-sub" % (prefix, number),
            firewall=given.get("firewall") or "%s-%d-internal" % (prefix, number),
            k8s_network=given.get("k8s_network") or "%s%d" % (k8s_prefix, number),
            mtu=given.get("mtu") if given.get("mtu") is not None else default_mtu,
            cidr=given.get("cidr"),
            network_profile=None,
            pod=True,
        )
        name_option = "%s.%%s" % option if option else None
        for key, derived_from in (("network", "name"), ("subnetwork", "subnetwork"), ("firewall", "firewall")):
            where = name_option % derived_from if name_option and given.get(derived_from) else "name_prefix"
            common.check_gce_name(problems, where, nic[key])
        where = name_option % "k8s_network" if name_option and given.get("k8s_network") else "k8s_network_prefix"
        if not DNS_LABEL.match(nic["k8s_network"]):
            problems.add(where, "%r is not a valid Kubernetes object name (lowercase letters, digits and hyphens, "
                                "at most 63)" % nic["k8s_network"])
        if given.get("mtu") is not None and not low <= given["mtu"] <= high:
            problems.add(name_option % "mtu", "%d is outside the MTU range %d-%d of VPC networks" % (
                given["mtu"], low, high))
        if nic["cidr"] is not None:
            nic["_net"] = common.check_cidr(problems, name_option % "cidr", nic["cidr"], max_prefix=29, min_prefix=8)
        nics.append(nic)

    if rdma:
        for nic in nics:
            for key in (NETWORK, SUBNETWORK, FIREWALL):
                if nic[key] is not None:
                    common.check_gce_name(problems, "name_prefix", nic[key])
    # the RDMA NICs share their RoCE network: only one-VPC-per-NIC networks must differ
    for key, option in (((NETWORK, "name"),) if not rdma else ()) + (
            (SUBNETWORK, "subnetwork"), (FIREWALL, "firewall"), ("k8s_network", "k8s_network")):
        names = [n[key] for n in nics if n[key] is not None]
        repeated = sorted(set(n for n in names if names.count(n) > 1))
        if repeated:
            problems.add("networks[].%s" % option if params.get("networks") else "name_prefix",
                         "names repeat: %s" % ", ".join(repeated))

    explicit_ranges = [("networks[%d].cidr" % (n["index"] - 1), n.get("_net")) for n in nics if n["cidr"]]
    common.check_no_overlap(problems, explicit_ranges)
    if base is not None and 8 <= length <= 29 and length >= base.prefixlen:
        _allocate(problems, nics, base, length)
    for nic in nics:
        nic.pop("_net", None)

    sources, any_source = _sources(problems, params, nics)
    if problems:
        raise FabricError(problems.message("gke_multinetwork"), problems.items)
    device_mode = gpudirect.profile(profile_name)["device_mode"] if profile_name else DEFAULT_DEVICE_MODE
    if rdma:
        pass  # interfaces and device modes are set per NIC by _rdma_nics
    elif profile_name:
        interfaces = gpudirect.interface_names(profile_name, count)
    else:
        interfaces = ["%s%d" % (gpudirect.INTERFACE_PREFIX, 1 + i) for i in range(count)]
    for position, nic in enumerate(nics):
        if not rdma:
            nic["interface"] = interfaces[position]
            nic["device_mode"] = device_mode
        nic["source_ranges"] = (list(sources) if sources is not None else [nic["cidr"]]) if nic[FIREWALL] else []
    return dict(project=params.get("project"), location=params.get("location"), region=region, zone=zone,
                cluster=params.get("cluster"), profile=profile_name, layout=entry["layout"] if entry else "vpc-per-nic",
                device_mode=device_mode, nics=nics, any_source=any_source,
                network_profile=gpudirect.network_profile_name(profile_name, zone) if rdma else None,
                description="GPU NIC fabric of GKE cluster %s (gpu_ops.cluster)" % params.get("cluster"))


def _rdma_zone(problems, params, region):
    """The zone of the RoCE VPC: ``zone``, else ``location`` when that is a zone (it must lie in the region)."""
    zone, location = params.get("zone"), params.get("location")
    if zone is None and common.location_kind(location) == "zone":
        zone = location
    if zone is None:
        problems.add("zone", "is required with gpudirect=%s when location is a region: the RoCE VPC is zonal (created "
                             "with the zone's %s network profile) and the GPU nodes must be in that zone"
                     % (params.get("gpudirect"), gpudirect.RDMA_NETWORK_PROFILE_SUFFIX))
        return None
    if common.location_kind(zone) != "zone":
        problems.add("zone", "%r is not a zone (for example us-central1-b)" % (zone,))
        return None
    if common.location_kind(location) == "zone" and zone != location:
        problems.add("zone", "%s differs from location %s; a zonal cluster's GPU nodes are in its zone" % (
            zone, location))
    elif region is not None and common.region_of(zone) != region:
        problems.add("zone", "%s is not in the region %s of location" % (zone, region))
    return zone


def _rdma_nics(params, entry, prefix, count, mtu, zone):
    """The gVNIC NIC (its own VPC, subnet and rule) and the RDMA NICs (one RoCE VPC, a subnet each, no rule)."""
    project = params.get("project")
    nics = [dict(index=1, network="%s-gvnic" % prefix, subnetwork="%s-gvnic-sub" % prefix,
                 firewall="%s-gvnic-internal" % prefix, k8s_network=gpudirect.RDMA_GVNIC_NETWORK, mtu=mtu, cidr=None,
                 network_profile=None, pod=False, device_mode=DEFAULT_DEVICE_MODE,
                 interface="%s%d" % (gpudirect.INTERFACE_PREFIX, entry["first_gpu_interface"] - 1))]
    link = "projects/%s/global/networkProfiles/%s" % (project, gpudirect.network_profile_name(
        params.get("gpudirect"), zone)) if zone else None
    interfaces = gpudirect.interface_names(params.get("gpudirect"), count)
    for index in range(count):
        nics.append(dict(index=index + 2, network="%s-rdma" % prefix, subnetwork="%s-rdma-sub-%d" % (prefix, index),
                         firewall=None, k8s_network="%s%d" % (gpudirect.RDMA_NETWORK_PREFIX, index), mtu=mtu,
                         cidr=None, network_profile=link, pod=True, device_mode=entry["device_mode"],
                         interface=interfaces[index]))
    return nics


def _allocate(problems, nics, base, length):
    """Give each NIC without an explicit ``cidr`` the next free /length block of ``base``."""
    taken = [n["_net"] for n in nics if n.get("_net") is not None]
    candidates = base.subnets(new_prefix=length)
    for nic in nics:
        if nic["cidr"] is not None:
            continue
        for candidate in candidates:
            if not any(candidate.overlaps(t) for t in taken):
                nic["cidr"] = str(candidate)
                taken.append(candidate)
                break
        else:
            problems.add("cidr_base", "%s has no room for %d subnets of /%d" % (base, len(nics), length))
            return


def _sources(problems, params, nics):
    """(source ranges for every rule or None for "each network's own subnet", any-source flag)."""
    allow_any = bool(params.get("firewall_allow_any_source"))
    ranges = params.get("firewall_source_ranges")
    if ranges is None:
        return (list(ANY_SOURCE) if allow_any else None), allow_any
    if not ranges:
        problems.add("firewall_source_ranges", "must list at least one CIDR block when set")
        return None, allow_any
    opened = []
    for value in ranges:
        try:
            network = ipaddress.ip_network(str(value), strict=True)
        except ValueError as exc:
            problems.add("firewall_source_ranges", "%r is not a valid CIDR block (%s)" % (value, exc))
            continue
        if network.prefixlen == 0:
            opened.append(str(value))
    if opened and not allow_any:
        problems.add("firewall_source_ranges", "%s opens the GPU NICs to every address; set "
                                               "firewall_allow_any_source: true to allow that" % ", ".join(opened))
    return list(ranges), allow_any


# ---------------------------------------------------------------------------------------------
# desired documents and outputs
# ---------------------------------------------------------------------------------------------


def network_body(fabric, nic):
    body = dict(name=nic[NETWORK], autoCreateSubnetworks=False, mtu=nic["mtu"],
                description="%s, NIC %d" % (fabric["description"], nic["index"]))
    if nic.get("network_profile"):
        body["networkProfile"] = nic["network_profile"]
        body["description"] = "%s, RoCE network of the RDMA NICs (%s)" % (
            fabric["description"], common.last_segment(nic["network_profile"]))
    return body


def subnetwork_body(fabric, nic):
    return dict(name=nic[SUBNETWORK], network="projects/%s/global/networks/%s" % (fabric["project"], nic[NETWORK]),
                ipCidrRange=nic["cidr"], region=fabric["region"],
                description="%s, NIC %d" % (fabric["description"], nic["index"]))


def firewall_body(fabric, nic):
    return dict(name=nic[FIREWALL], network="projects/%s/global/networks/%s" % (fabric["project"], nic[NETWORK]),
                direction="INGRESS", sourceRanges=list(nic["source_ranges"]), allowed=copy.deepcopy(FIREWALL_ALLOWED),
                description="%s: internal tcp/udp/icmp on NIC %d" % (fabric["description"], nic["index"]))


def manifests(fabric):
    """GKENetworkParamSet + Network objects, in apply order (each parameter set before its Network)."""
    objects = []
    for nic in fabric["nics"]:
        objects.append(dict(apiVersion=API_VERSION, kind="GKENetworkParamSet", metadata=dict(name=nic["k8s_network"]),
                            spec=dict(vpc=nic[NETWORK], vpcSubnet=nic[SUBNETWORK], deviceMode=nic["device_mode"])))
        objects.append(dict(apiVersion=API_VERSION, kind="Network", metadata=dict(name=nic["k8s_network"]),
                            spec=dict(type="Device", parametersRef=dict(group=API_GROUP, kind="GKENetworkParamSet",
                                                                        name=nic["k8s_network"]))))
    return objects


def outputs(fabric):
    """Everything later steps need, so that none of them re-derives a name."""
    nics = fabric["nics"]
    names = [n["k8s_network"] for n in nics]
    # pods attach to the GPU NICs only (RDMA pods leave the node's extra gVNIC out: CEA gpudirect-rdma manifests)
    pod_nics = [n for n in nics if n["pod"]]
    annotation = gpudirect.interfaces_annotation(fabric["profile"], [n["k8s_network"] for n in pod_nics],
                                                 interfaces=[n["interface"] for n in pod_nics])
    return dict(
        gpudirect=fabric["profile"],
        region=fabric["region"],
        zone=fabric["zone"],
        network_profile=fabric["network_profile"],
        device_mode=fabric["device_mode"],
        networks=[dict(index=n["index"], network=n[NETWORK], subnetwork=n[SUBNETWORK], firewall=n[FIREWALL],
                       cidr=n["cidr"], mtu=n["mtu"], k8s_network=n["k8s_network"], interface=n["interface"],
                       device_mode=n["device_mode"], source_ranges=list(n["source_ranges"])) for n in nics],
        additional_node_networks=[dict(network=n[NETWORK], subnetwork=n[SUBNETWORK]) for n in nics],
        k8s_network_names=names,
        manifests=manifests(fabric),
        pod_interfaces=json.loads(annotation),
        pod_interfaces_annotation=annotation,
        pod_annotations={gpudirect.DEFAULT_INTERFACE_ANNOTATION: gpudirect.CONTROL_INTERFACE, gpudirect.INTERFACES_ANNOTATION: annotation},
    )


# ---------------------------------------------------------------------------------------------
# comparison views (only what this module sets is compared)
# ---------------------------------------------------------------------------------------------


def _allowed_view(rules):
    view = []
    for rule in rules or []:
        ports = sorted(rule.get("ports") or [])
        view.append(dict(IPProtocol=rule.get("IPProtocol"), ports=ports))
    return sorted(view, key=lambda r: (r["IPProtocol"] or "", r["ports"]))


def firewall_view(document):
    return dict(network=common.last_segment(document.get("network")), direction=document.get("direction") or "INGRESS",
                sourceRanges=sorted(document.get("sourceRanges") or []), allowed=_allowed_view(document.get("allowed")),
                denied=_allowed_view(document.get("denied")), disabled=bool(document.get("disabled")),
                targetTags=sorted(document.get("targetTags") or []),
                sourceTags=sorted(document.get("sourceTags") or []))


class _Drift:
    def __init__(self):
        self.items = []
        self.refused = []

    def add(self, kind, name, field, current, desired, fixable, option=None, why=None):
        self.items.append(dict(kind=kind, name=name, field=field, current=current, desired=desired,
                               fixable=fixable))
        if not fixable:
            self.refused.append("%s %s: %s is %s, wanted %s%s%s" % (
                kind, name, field, json.dumps(current), json.dumps(desired),
                " (option %s)" % option if option else "", "; %s" % why if why else ""))


# ---------------------------------------------------------------------------------------------
# engine
# ---------------------------------------------------------------------------------------------


class FabricEngine:
    """Reads, plans and applies one fabric through a _gcp.GcpSession."""

    def __init__(self, session, fabric, check_mode=False, concurrency=DEFAULT_CONCURRENCY, warn=None):
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError("concurrency must be between 1 and %d, got %r" % (MAX_CONCURRENCY, concurrency))
        self.session = session
        self.fabric = fabric
        self.check_mode = check_mode
        self.concurrency = concurrency
        self.slots = threading.BoundedSemaphore(self.concurrency)
        self.plan = Plan()
        self.drift = _Drift()
        self.warnings = []
        self._warn = warn
        self.current = {}
        self.actions = {}  # (kind, name) -> callable that carries the change out
        self.created = []  # changes whose create this run finished (rolled back when a later create is invalid)
        self.rolled_back = []
        self._created_lock = threading.Lock()

    # ---- urls

    def url(self, kind, name):
        if kind == NETWORK:
            return self.session.compute_url("global/networks/%s" % name)
        if kind == SUBNETWORK:
            return self.session.compute_url("regions/%s/subnetworks/%s" % (self.fabric["region"], name))
        return self.session.compute_url("global/firewalls/%s" % name)

    def collection(self, kind):
        if kind == NETWORK:
            return self.session.compute_url("global/networks")
        if kind == SUBNETWORK:
            return self.session.compute_url("regions/%s/subnetworks" % self.fabric["region"])
        return self.session.compute_url("global/firewalls")

    def warn(self, message):
        self.warnings.append(message)
        if self._warn:
            self._warn(message)

    # ---- read

    def read(self):
        """Read every resource of the fabric once, concurrently."""
        keys = resource_keys(self.fabric)
        found = self.session.run_concurrently([lambda k=k: self.session.get(self.url(*k)) for k in keys],
                                              max_workers=min(32, len(keys)))
        self.current = dict(zip(keys, found))
        return self.current

    # ---- plan

    def plan_present(self):
        fabric = self.fabric
        planned = set()
        for nic in fabric["nics"]:
            if nic[NETWORK] not in planned:
                planned.add(nic[NETWORK])
                self._plan_network(nic)
            self._plan_subnetwork(nic)
            if nic[FIREWALL] is not None:
                self._plan_firewall(nic)
        if self.drift.refused:
            raise FabricError("the fabric has drifted in ways the API cannot fix in place (nothing was changed): %s. "
                              "Delete the fabric (state: absent) and create it again, or change the options to "
                              "match." % "; ".join(self.drift.refused), self.drift.refused)

    def _existing(self, kind, name, body):
        """The current ``kind`` named ``name``; None where there is none, once its creation is planned."""
        current = self.current.get((kind, name))
        if current is None:
            self.plan.create(kind, name, body, request=("POST", body))
        return current

    def _plan_network(self, nic):
        name = nic[NETWORK]
        current = self._existing(NETWORK, name, network_body(self.fabric, nic))
        if current is None:
            return
        if current.get("autoCreateSubnetworks") is not False:
            self.drift.add(NETWORK, name, "autoCreateSubnetworks", current.get("autoCreateSubnetworks"), False, False,
                           why="the GPU NIC networks must be custom-mode VPCs")
        have_profile = common.last_segment(current.get("networkProfile")) or None
        want_profile = common.last_segment(nic.get("network_profile")) or None
        if have_profile != want_profile:
            self.drift.add(NETWORK, name, "networkProfile", have_profile, want_profile, False,
                           why="a network's profile is set only when it is created")
        have = current.get("mtu", 1460)
        if have != nic["mtu"]:
            self.drift.add(NETWORK, name, "mtu", have, nic["mtu"], True)
            self.plan.update(NETWORK, name, current, dict(current, mtu=nic["mtu"]), ["mtu"],
                             request=("PATCH", {"mtu": nic["mtu"]}))
            self.warn("network %s: MTU %s differs from the wanted %s and is patched; nodes attached to it keep the "
                      "old MTU until they are re-created" % (name, have, nic["mtu"]))

    def _plan_subnetwork(self, nic):
        name = nic[SUBNETWORK]
        current = self._existing(SUBNETWORK, name, subnetwork_body(self.fabric, nic))
        if current is None:
            return
        option = "networks[%d].cidr" % (nic["index"] - 1)
        network = common.last_segment(current.get("network"))
        if network != nic[NETWORK]:
            self.drift.add(SUBNETWORK, name, "network", network, nic[NETWORK], False,
                           why="a subnet cannot move to another network")
        have, want = current.get("ipCidrRange"), nic["cidr"]
        if have != want:
            have_net, want_net = ipaddress.ip_network(have), ipaddress.ip_network(want)
            if want_net.prefixlen < have_net.prefixlen and have_net.subnet_of(want_net):
                self.drift.add(SUBNETWORK, name, "ipCidrRange", have, want, True)
                self.plan.update(SUBNETWORK, name, current, dict(current, ipCidrRange=want), ["ipCidrRange"],
                                 request=("POST", {"ipCidrRange": want}))
            else:
                self.drift.add(SUBNETWORK, name, "ipCidrRange", have, want, False, option=option,
                               why="the API can only expand a subnet range (expandIpCidrRange) to a larger range "
                                   "that contains it, never shrink or move it")

    def _plan_firewall(self, nic):
        name = nic[FIREWALL]
        body = firewall_body(self.fabric, nic)
        current = self._existing(FIREWALL, name, body)
        if current is None:
            return
        want, have = firewall_view(body), firewall_view(current)
        if have["network"] != want["network"]:
            self.drift.add(FIREWALL, name, "network", have["network"], want["network"], False,
                           why="the network of a firewall rule cannot be changed")
            return
        fields = differing_fields(want, have)
        if not fields:
            return
        patch = {}
        for field in fields:
            self.drift.add(FIREWALL, name, field, have[field], want[field], True)
            if field in ("allowed", "denied"):
                patch["allowed"] = body["allowed"]
                patch["denied"] = []
            elif field in ("targetTags", "sourceTags"):
                patch[field] = []
            elif field == "disabled":
                patch["disabled"] = False
            else:
                patch[field] = body[field]
        self.plan.update(FIREWALL, name, current, dict(current, **patch), sorted(fields), request=("PATCH", patch))

    def plan_absent(self):
        planned = set()
        for nic in self.fabric["nics"]:
            for kind in (FIREWALL, SUBNETWORK, NETWORK):
                current = self.current.get((kind, nic[kind]))
                if current is not None and (kind, nic[kind]) not in planned:
                    planned.add((kind, nic[kind]))
                    self.plan.delete(kind, nic[kind], current, request=("DELETE", None))
        # a network that is not ours to delete would fail half-way: refuse before any change
        problems = []
        for nic in self.fabric["nics"]:
            current = self.current.get((SUBNETWORK, nic[SUBNETWORK]))
            if current is not None and common.last_segment(current.get("network")) != nic[NETWORK]:
                problems.append("subnetwork %s belongs to network %s, not %s" % (
                    nic[SUBNETWORK], common.last_segment(current.get("network")), nic[NETWORK]))
        if problems:
            raise FabricError("refusing to delete (nothing was changed): %s" % "; ".join(problems), problems)

    # ---- preflight

    def preflight(self):
        """Before the first write: the region (and zone) exist. Only when the plan changes something."""
        if not self.plan.changes or self.session.render:
            return
        problems = Problems()
        location, region = self.fabric.get("location"), self.fabric["region"]
        option = "location"
        offers.check_region(self.session, problems, option, region)
        if location and location != region and not problems:
            offers.check_zone(self.session, problems, option, location)
        profile = self.fabric.get("network_profile")
        creates = any(c.action == "create" for c in self.plan.changes)
        if profile and creates and not problems:
            offers.check_network_profile(self.session, problems, "zone", profile, self.fabric["zone"],
                                         nic_type=gpudirect.RDMA_NIC_TYPE)
        for warning in problems.warnings:
            self.warn(warning)
        if problems:
            raise FabricError(problems.message("gke_multinetwork"), problems.items)

    # ---- apply

    def apply(self):
        """Carry the plan out: per NIC in parallel, network then (subnet, firewall) - or the reverse for deletes."""
        changes = dict(((c.kind, c.name), c) for c in self.plan.changes)
        if not changes or self.check_mode:
            return
        groups = {}
        for nic in self.fabric["nics"]:
            groups.setdefault(nic[NETWORK], []).append(nic)
        tasks = [lambda g=g: self._apply_network(g, changes) for g in groups.values()]
        try:
            self.session.run_concurrently(tasks, max_workers=len(tasks))
        except FabricError as exc:
            errors = [exc] + list(getattr(exc, "others", []))
            if self.created and any(_refused_as_invalid(e) for e in errors):
                raise self._roll_back(exc, errors) from None
            raise

    def _roll_back(self, exc, errors):
        """Delete what this run created (leaves, then networks); the error to raise, saying what happened."""
        failed = []
        for wave in ([c for c in self.created if c.kind != NETWORK], [c for c in self.created if c.kind == NETWORK]):
            if wave:
                self.session.run_concurrently([lambda c=c: self._undo(c, failed) for c in wave],
                                              max_workers=min(self.concurrency, len(wave)))
        summary = "rolled back what this run created: deleted %s" % (", ".join(self.rolled_back) or "nothing")
        if failed:
            summary += "; could not delete %s" % "; ".join(failed)
        return FabricError("%s; %s" % ("; ".join(str(e) for e in errors), summary), getattr(exc, "problems", []),
                           status=exc.status)

    def _undo(self, change, failed):
        what = "%s %s" % (change.kind, change.name)
        try:
            with self.slots:
                self._delete(change)
        except (ApiError, FabricError) as exc:
            failed.append("%s (%s)" % (what, common.operation_error_text(exc)))
            return
        with self._created_lock:
            self.rolled_back.append(what)

    def _apply_network(self, nics, changes):
        """One network's changes: the network, then its subnets and rules together (deletes the other way)."""
        network = changes.get((NETWORK, nics[0][NETWORK]))
        leaves = [changes.get((kind, nic[kind])) for nic in nics for kind in (SUBNETWORK, FIREWALL)
                  if nic[kind] is not None]
        leaves = [c for c in leaves if c is not None]
        if network is not None and network.action != "delete":
            self._carry_out(network)
        if leaves:
            self.session.run_concurrently([lambda c=c: self._carry_out(c) for c in leaves], max_workers=len(leaves))
        if network is not None and network.action == "delete":
            self._carry_out(network)

    def _carry_out(self, change):
        try:
            with self.slots:
                if change.action == "create":
                    self._create(change)
                elif change.action == "update":
                    self._update(change)
                elif change.action == "delete":
                    self._delete(change)
        except ApiError as exc:
            raise FabricError("%s %s %s failed: %s" % (
                change.action, change.kind, change.name, common.operation_error_text(exc)),
                status=exc.status if change.action == "create" and not isinstance(exc, _OperationFailed) else None
            ) from None

    def _create(self, change):
        method, body = change.request
        try:
            op = self.session.post(self.collection(change.kind), body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # a previous (interrupted) run created it or is still creating it: wait for it, then compare
            current = self._wait_visible(change.kind, change.name)
            self._converge_existing(change, current)
            return
        del method
        try:
            self.session.wait_compute_operation(op)
        except ApiError as exc:
            raise _OperationFailed(exc) from None
        with self._created_lock:
            self.created.append(change)

    def _converge_existing(self, change, current):
        """After a 409: bring the resource an earlier run created to the wanted state (or refuse)."""
        nic = self._nic_of(change.kind, change.name)
        sub = FabricEngine(self.session, self.fabric, concurrency=1, warn=self.warn)
        sub.current = {(change.kind, change.name): current}
        planner = {NETWORK: sub._plan_network, SUBNETWORK: sub._plan_subnetwork, FIREWALL: sub._plan_firewall}
        planner[change.kind](nic)
        self.drift.items.extend(sub.drift.items)
        if sub.drift.refused:
            raise FabricError("%s %s already exists and differs in ways the API cannot fix: %s" % (
                change.kind, change.name, "; ".join(sub.drift.refused)))
        for extra in sub.plan.changes:
            self._update(extra)

    def _nic_of(self, kind, name):
        for nic in self.fabric["nics"]:
            if nic[kind] == name:
                return nic
        raise KeyError(name)

    def _update(self, change):
        method, body = change.request
        url = self.url(change.kind, change.name)
        if change.kind == SUBNETWORK:
            op = self.session.post(url + "/expandIpCidrRange", body)
        elif method == "PATCH":
            op = self.session.patch(url, body)
        else:
            op = self.session.put(url, body)
        self.session.wait_compute_operation(op)

    def _delete(self, change):
        url = self.url(change.kind, change.name)
        try:
            op = self.session.delete(url)
        except ApiError as exc:
            if exc.status == 404:
                return
            reason = _reason(exc)
            if reason == "resourceNotReady":
                # an earlier run's delete (or create) is still running
                self._wait_gone(change.kind, change.name)
                return
            if reason == "resourceInUseByAnotherResource":
                raise FabricError("network %s is still used by resources this module does not manage (%s); remove "
                                  "them first" % (change.name, common.operation_error_text(exc))) from None
            raise
        self.session.wait_compute_operation(op)

    def _poll(self, kind, name, until):
        return self.session.settle(lambda: self.session.get(self.url(kind, name)), until,
                                   "%s %s did not settle" % (kind, name))

    def _wait_visible(self, kind, name):
        return self._poll(kind, name, lambda current: current is not None)

    def _wait_gone(self, kind, name):
        self._poll(kind, name, lambda current: current is None)


class _OperationFailed(ApiError):
    """A create the service accepted whose operation then failed (quota, capacity): no rollback."""

    def __init__(self, exc):
        self.cause = exc
        super().__init__(getattr(exc, "status", None), getattr(exc, "message", None) or "%s" % exc)

    def describe(self):
        return common.operation_error_text(self.cause)


def resource_keys(fabric):
    """(kind, name) of every resource of the fabric, each once, in NIC order."""
    keys = []
    for nic in fabric["nics"]:
        for kind in (NETWORK, SUBNETWORK, FIREWALL):
            if nic[kind] is not None and (kind, nic[kind]) not in keys:
                keys.append((kind, nic[kind]))
    return keys


def _refused_as_invalid(exc):
    status = getattr(exc, "status", None)
    return status is not None and 400 <= status < 500 and status not in NOT_INVALID


def _reason(exc):
    body = getattr(exc, "body", None)
    try:
        return body["error"]["errors"][0]["reason"]
    except (KeyError, IndexError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------
# module entry point
# ---------------------------------------------------------------------------------------------


def input_check(params):
    """What ``validate_only`` returns: every input problem (``problems``, ``option: problem`` lines) and, when there is
    none, the fabric the options describe (the names later steps take, as a converge returns them), without any
    request. The module's run and the action plugin's check in the controller both answer with it."""
    try:
        fabric = resolve(params)
    except FabricError as exc:
        return dict(changed=False, problems=list(exc.problems))
    return dict(outputs(fabric), changed=False, problems=[], state=params["state"])


def run(params, context):
    """Entry point of the gke_multinetwork module (the contract of ``_core.contract``)."""
    if params.get("validate_only"):
        return input_check(params)
    try:
        fabric = resolve(params)
    except FabricError as exc:
        raise EngineError(str(exc), problems=exc.problems)
    session = context.session(GcpSession)
    concurrency = params.get("concurrency")
    engine = FabricEngine(session, fabric, check_mode=context.check_mode,
                          concurrency=DEFAULT_CONCURRENCY if concurrency is None else concurrency, warn=None)
    try:
        engine.read()
        if params["state"] == "present":
            engine.plan_present()
        else:
            engine.plan_absent()
        engine.preflight()
        engine.apply()
    except (FabricError, ApiError, WaitTimeout) as exc:
        errors = [exc] + list(getattr(exc, "others", []))
        texts = [str(e) if isinstance(e, (FabricError, WaitTimeout)) else "Compute Engine request failed: %s"
                 % common.operation_error_text(e) for e in errors]
        raise EngineError("; ".join(texts), problems=getattr(exc, "problems", []),
                          status=getattr(exc, "status", None), changes=[c.as_dict() for c in engine.plan.changes],
                          drift=engine.drift.items, rolled_back=engine.rolled_back)
    for warning in engine.warnings:
        context.warn(warning)
    result = engine.plan.result(diff=context.diff)
    result.update(outputs(fabric))
    result["drift"] = engine.drift.items
    result["state"] = params["state"]
    return result
