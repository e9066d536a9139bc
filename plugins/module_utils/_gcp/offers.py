# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Preflight reads: what Google Cloud offers where, asked before the first mutating request.

Input that only the service can judge (does region ``us-central9`` exist, is ``a3-megagpu-8g`` offered in
``us-east4-b``, how many ``nvidia-l4`` cards fit one instance, which GKE versions and image types the
location offers) is read here, one GET per fact and at most once per run (``GcpSession.read_once``), and
every refusal is a ``Problems`` line naming the option with the service's answer. A read the credentials may
not make (403: a least-privilege role without, say, ``compute.machineTypes.get``) is skipped with a warning in
``warnings`` (when the caller passes a list), never turned into a failure. The engines call these
only when their plan will write something (a no-op re-run reads nothing more) and never in render mode,
where every read finds nothing.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError

# answers that say "this input is wrong" rather than "you may not ask" or "try later"
_REFUSALS = (400, 404, 422)
FORBIDDEN = 403


def _read(session, url, problems, option, what):
    """The document at ``url``; None (and a problem naming ``option``) when the service refuses ``what``."""
    try:
        document = session.read_once(url)
    except ApiError as exc:
        if exc.status == FORBIDDEN:
            warnings = getattr(problems, "warnings", None)
            if warnings is not None:
                warnings.append("%s: %s was not checked before the change: the credentials may not read %s (HTTP 403)"
                                % (option, what, url.split("/v1/", 1)[-1]))
            return None
        if exc.status not in _REFUSALS:
            raise
        describe = getattr(exc, "describe", None)
        problems.add(option, "%s: the service refused it (%s)" % (what, describe() if callable(describe) else exc))
        return None
    if document is None:
        problems.add(option, "%s does not exist (Compute Engine/GKE answered 404 Not Found for %s)" % (
            what, url.split("/v1/", 1)[-1]))
    return document


def check_region(session, problems, option, region):
    """Compute Engine ``regions.get``; the region document or None."""
    return _read(session, session.compute_url("regions/%s" % region), problems, option, "region %s" % region)


def check_zone(session, problems, option, zone):
    """Compute Engine ``zones.get``; the zone document or None."""
    return _read(session, session.compute_url("zones/%s" % zone), problems, option, "zone %s" % zone)


def check_network_profile(session, problems, option, name, zone, nic_type=None):
    """Compute Engine ``networkProfiles.get`` of ``name``: it exists, is restricted to ``zone`` and (with
    ``nic_type``) accepts that NIC type (``features.interfaceTypes``). The profile document or None."""
    document = _read(session, session.compute_url("global/networkProfiles/%s" % name), problems, option,
                     "network profile %s" % name)
    if document is None:
        return None
    where = document.get("location") or {}
    if where.get("name") and where.get("name") != zone:
        problems.add(option, "network profile %s is restricted to %s %s, not zone %s" % (
            name, (where.get("scope") or "location").lower(), where["name"], zone))
    types = (document.get("features") or {}).get("interfaceTypes") or []
    if nic_type and types and nic_type not in types:
        problems.add(option, "network profile %s takes %s network interfaces, not %s" % (
            name, ", ".join(types), nic_type))
    return document


def server_config_url(session, location):
    """GKE ``getServerConfig`` of a location; every reader goes through ``read_once`` with this URL."""
    return session.container_url("projects/%s/locations/%s/serverConfig" % (session.project, location))


def server_config(session, problems, option, location):
    """GKE ``getServerConfig`` of a location (versions and image types offered), or None."""
    return _read(session, server_config_url(session, location), problems, option, "location %s" % location)


def check_versions(problems, config, master=(), node=()):
    """``master``/``node``: (option, version) pairs checked against the server config's valid versions."""
    for pairs, field, what in ((master, "validMasterVersions", "control-plane"), (node, "validNodeVersions", "node")):
        offered = config.get(field) or []
        for option, version in pairs:
            if version and offered and version not in offered:
                problems.add(option, "%s is not a %s version GKE offers in this location now; offered: %s" % (
                    version, what, ", ".join(offered[:8]) + (" ..." if len(offered) > 8 else "")))


def check_image_type(problems, config, option, image_type):
    offered = config.get("validImageTypes") or []
    if image_type and offered and image_type.upper() not in [i.upper() for i in offered]:
        problems.add(option, "%s is not an image type GKE offers in this location; offered: %s" % (
            image_type, ", ".join(offered)))


def check_zone_offers(session, problems, zone, machine_type=None, accelerator=None, disk_type=None):
    """What one zone must offer for a node: ``machine_type``/``disk_type`` are (option, value) pairs,
    ``accelerator`` is (type option, type, count option, count). Returns the machine type document or None."""
    machine = None
    if machine_type and machine_type[1]:
        option, value = machine_type
        machine = _read(session, session.compute_url("zones/%s/machineTypes/%s" % (zone, value)), problems,
                        option, "machine type %s in zone %s" % (value, zone))
    if accelerator and accelerator[1]:
        type_option, value, count_option, count = accelerator
        offered = _read(session, session.compute_url("zones/%s/acceleratorTypes/%s" % (zone, value)), problems,
                        type_option, "accelerator type %s in zone %s" % (value, zone))
        most = (offered or {}).get("maximumCardsPerInstance")
        if most and count and int(count) > int(most):
            problems.add(count_option, "%s cards of %s: zone %s allows at most %s per instance "
                                       "(acceleratorTypes.maximumCardsPerInstance)" % (count, value, zone, most))
    if disk_type and disk_type[1]:
        option, value = disk_type
        _read(session, session.compute_url("zones/%s/diskTypes/%s" % (zone, value)), problems, option,
              "disk type %s in zone %s" % (value, zone))
    return machine


def check_node_pool(session, problems, location, zones, named_zones, node):
    """What a GKE node pool needs from the service, before it is created or changed.

    ``zones``: the zones its nodes run in; ``named_zones``: whether the user named them (O(node_locations): then
    each is read, else they come from the cluster and exist). ``node``: option -> value for machine_type,
    accelerator_type, accelerator_count, disk_type, image_type and node_version (None: not checked).
    """
    if node.get("image_type") or node.get("node_version"):
        config = server_config(session, problems, "location", location)
        if config is not None:
            check_image_type(problems, config, "image_type", node.get("image_type"))
            check_versions(problems, config, node=[("node_version", node.get("node_version"))])
    for zone in zones:
        if named_zones and check_zone(session, problems, "node_locations", zone) is None:
            continue
        check_zone_offers(session, problems, zone, machine_type=("machine_type", node.get("machine_type")),
                          accelerator=("accelerator_type", node.get("accelerator_type"), "accelerator_count",
                                       node.get("accelerator_count")),
                          disk_type=("disk_type", node.get("disk_type")))
