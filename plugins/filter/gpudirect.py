# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUDirect filters: workload patch, catalog read-out and NCCL environments.

Documentation: plugins/filter/gpudirect_workload.yml, gpudirect_profile.yml, gpudirect_conflicts.yml, nccl_env.yml,
compute_domain.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

gke_gpudirect = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect")
nccl = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.nccl")
workload = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._gpudirect.workload")

display = Display()

NCCL_ENV_FORMATS = ("dict", "k8s", "exports", "conf")


def _warn(messages):
    for message in messages:
        display.warning(message)


def _is_workload(item):
    return isinstance(item, dict) and item.get("kind") in workload.WORKLOAD_KINDS


def _has_pod_template(item):
    spec = item.get("spec") if isinstance(item, dict) else None
    if not isinstance(spec, dict):
        return False
    return any(key in spec for key in ("containers", "template", "jobTemplate", "replicatedJobs"))


def gpudirect_workload(manifest, fabric, network_names, gke_version=None, sidecar="auto", registry=None,
                       machine_type=None, interfaces=None, nccl_overrides=None, dranet=False, claim_template=None,
                       compute_domain=None):
    """Add GPUDirect to a workload manifest (or to every workload of a list of manifests)."""
    kwargs = dict(gke_version=gke_version, sidecar=sidecar, registry=registry, machine_type=machine_type,
                  interfaces=interfaces, nccl_overrides=nccl_overrides, dranet=dranet, claim_template=claim_template,
                  compute_domain=compute_domain)
    warnings = []
    try:
        _inputs.version_text("gke_version", gke_version)
        _check_override_values(nccl_overrides)
        if not isinstance(dranet, bool):
            raise ValueError("dranet: must be a boolean, got %s" % type(dranet).__name__)
        if isinstance(manifest, (list, tuple)):
            result = []
            for index, item in enumerate(manifest):
                if not isinstance(item, dict):
                    raise workload.WorkloadError("item %d: must be a Kubernetes object (a dict), got %s"
                                                 % (index, type(item).__name__))
                if _is_workload(item):
                    result.append(workload.patch_workload(item, fabric, network_names, warnings=warnings, **kwargs))
                elif _has_pod_template(item):
                    raise workload.WorkloadError("item %d: kind %r is not supported; supported: %s" % (
                        index, item.get("kind"), ", ".join(sorted(workload.WORKLOAD_KINDS))))
                else:
                    result.append(item)  # Services, ConfigMaps, ... pass through
        else:
            result = workload.patch_workload(manifest, fabric, network_names, warnings=warnings, **kwargs)
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_workload: %s" % exc)
    _warn(warnings)
    return result


def compute_domain(name, namespace=None, claim_template=None):
    """The ComputeDomain of one job (multi-node NVLink through IMEX)."""
    try:
        return workload.compute_domain(name, namespace=namespace, claim_template=claim_template)
    except ValueError as exc:
        raise AnsibleFilterError("compute_domain: %s" % exc)


def gpudirect_profile(name, gke_version=None, registry=None):
    """The resolved catalog entry of a GPUDirect profile (images, installer, daemon, thresholds...)."""
    try:
        _inputs.text("name", name)
        _inputs.version_text("gke_version", gke_version)
        return gke_gpudirect.describe(name, gke_version=gke_version, registry=registry)
    except (ValueError, KeyError) as exc:
        raise AnsibleFilterError("gpudirect_profile: %s" % exc)


def gpudirect_conflicts(settings, profile):
    """The settings a GPUDirect profile refuses (RDMA: TCPX/TCPXO daemon settings, Fast Socket, GPU sharing)."""
    try:
        _inputs.text("profile", profile)
        if not isinstance(settings, dict):
            raise ValueError("settings: must be a dict of variable name -> value, got %s" % type(settings).__name__)
        return workload.rdma_conflicts(profile, settings)
    except ValueError as exc:
        raise AnsibleFilterError("gpudirect_conflicts: %s" % exc)


def _check_override_values(overrides):
    """Override values NCCL can read: text, whole numbers, booleans or null (removes the key)."""
    if _inputs.mapping("overrides", overrides) is None:
        return
    for key, value in overrides.items():
        if isinstance(value, float) and not value.is_integer():
            _inputs.number("overrides.%s" % key, value)  # nan / inf are refused here
        elif value is not None and not isinstance(value, (str, int, float)):
            raise ValueError("overrides.%s: must be text or a number, got %s" % (key, type(value).__name__))


def nccl_env(fabric, gke_version=None, machine_type=None, interfaces=None, overrides=None, ctrl_interface=None,
             format="dict"):  # pylint: disable=redefined-builtin
    """The recommended NCCL environment of a fabric as a dict, a Kubernetes env list, export lines or nccl.conf text."""
    if format not in NCCL_ENV_FORMATS:
        raise AnsibleFilterError("nccl_env: format %r is not one of %s" % (format, ", ".join(NCCL_ENV_FORMATS)))
    try:
        _inputs.version_text("gke_version", gke_version)
        _check_override_values(overrides)
        env, warnings = nccl.nccl_environment(
            fabric, gke_version=gke_version, machine_type=machine_type, interfaces=interfaces,
            overrides=overrides, ctrl_interface=ctrl_interface)
    except ValueError as exc:
        raise AnsibleFilterError("nccl_env: %s" % exc)
    _warn(warnings)
    if format == "k8s":
        return nccl.as_k8s_env(env)
    if format == "exports":
        return nccl.as_exports(env)
    if format == "conf":
        return nccl.as_nccl_conf(env)
    return env


class FilterModule:
    """GPUDirect filters."""

    def filters(self):
        return {
            "gpudirect_workload": gpudirect_workload,
            "gpudirect_profile": gpudirect_profile,
            "gpudirect_conflicts": gpudirect_conflicts,
            "nccl_env": nccl_env,
            "compute_domain": compute_domain,
        }
