# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GKE versions a location offers (``getServerConfig``), and which of them a GPUDirect profile accepts.

Read by gke_server_config_info (its engine: ``run``), and by gke_cluster to resolve a version alias (``latest`` or a minor such as
``1.30``) to the newest offered patch that passes the profile's version gate (``_catalog.gke_gpudirect.version_gate_error``,
the one table of minimum versions), so nobody copies a version out of ``gcloud container get-server-config``.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.checks import operation_error_text
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.offers import server_config_url
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import (
    parse_gke_version, version_gate_error,
)

LATEST = "latest"
_MINOR = re.compile(r"^(\d+)\.(\d+)\Z")
CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")


class VersionError(Exception):
    """No offered version fits (the message lists what is offered)."""


def is_alias(value):
    """Whether ``value`` is a version alias rather than a full version."""
    return value == LATEST or bool(_MINOR.match(str(value or "")))


def read(session, location):
    """The server config of ``location``; VersionError when there is none to read (render mode, unknown location)."""
    # the same cached read as gke_cluster's preflight: one GET of the server config per run
    config = session.read_once(server_config_url(session, location))
    if not config:
        if session.render:
            raise VersionError("render mode reads nothing from GKE, so a version alias cannot be resolved: pin a full "
                               "version (MAJOR.MINOR.PATCH-gke.BUILD)")
        raise VersionError("GKE has no server config for location %s" % location)
    return config


def _sorted(versions):
    """Full versions, newest first; anything else (GKE lists only full versions) is left out."""
    full = []
    for version in versions or []:
        try:
            full.append((parse_gke_version(version), version))
        except ValueError:
            continue
    return [pair[1] for pair in sorted(full, reverse=True)]


def offered(config, channel=None):
    """Control-plane versions offered, newest first: a release channel's valid versions, or the static ones."""
    if channel and channel.upper() in CHANNELS:
        for entry in config.get("channels") or []:
            if entry.get("channel") == channel.upper():
                return _sorted(entry.get("validVersions"))
        return []
    return _sorted(config.get("validMasterVersions"))


def gpudirect_ready(versions, profile):
    """The versions that pass ``profile``'s version gate (all of them without a profile)."""
    if not profile:
        return list(versions)
    return [v for v in versions if version_gate_error(profile, v) is None]


def resolve(config, alias, profile=None, channel=None):
    """The newest offered version that ``alias`` names and ``profile`` accepts; VersionError otherwise."""
    versions = offered(config, channel)
    if alias != LATEST:
        versions = [v for v in versions if v.startswith(alias + ".")]
    candidates = gpudirect_ready(versions, profile)
    if candidates:
        return candidates[0]
    where = "release channel %s" % channel.upper() if channel and channel.upper() in CHANNELS else "this location"
    needs = " that meets the %s minimum" % profile if profile else ""
    raise VersionError("no GKE version offered in %s matches %r%s; offered: %s" % (
        where, alias, needs, ", ".join(offered(config, channel)) or "none"))


def summary(config, profile=None):
    """What gke_server_config_info returns."""
    masters = offered(config)
    result = dict(
        default_cluster_version=config.get("defaultClusterVersion"),
        valid_master_versions=masters,
        valid_node_versions=_sorted(config.get("validNodeVersions")),
        default_image_type=config.get("defaultImageType"),
        valid_image_types=list(config.get("validImageTypes") or []),
        channels=dict((entry.get("channel"), dict(default_version=entry.get("defaultVersion"),
                                                  valid_versions=_sorted(entry.get("validVersions"))))
                      for entry in config.get("channels") or [] if entry.get("channel")),
    )
    if profile:
        ready = gpudirect_ready(masters, profile)
        result["gpudirect"] = dict(profile=profile, versions=ready, latest=ready[0] if ready else None)
    return result


def run(params, context):
    """Entry point of the gke_server_config_info module (the contract of ``_core.contract``)."""
    session = context.session(GcpSession)
    try:
        config = read(session, params["location"])
    except VersionError as exc:
        raise EngineError(str(exc))
    except ApiError as exc:
        raise EngineError("GKE request failed: %s" % operation_error_text(exc), status=exc.status)
    return dict(changed=False, **summary(config, params.get("gpudirect")))
