# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator plan (plugins/plugin_utils/_operators/gpu_operator_plan.py): values per chart version and platform, refusals.

module_utils/fixtures/gpu_operator/values_keys.json holds the leaf key paths of the upstream chart's values.yaml at
each pinned tag (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml); rendered values are
compared with it, independently of the catalog's own key table.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_plan as ops
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import inputs
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host as host


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "module_utils", "fixtures")
with open(os.path.join(FIXTURES, "gpu_operator", "values_keys.json"), encoding="utf-8") as _handle:
    UPSTREAM_KEYS = json.load(_handle)["tags"]

VERSIONS = ["v24.9.2", "v25.3.4", "v25.10.1", "v26.3.0"]
PRESETS = ["generic", "gke", "aks", "openshift"]


def _leaf_paths(values, prefix=""):
    for key, value in values.items():
        path = "%s.%s" % (prefix, key) if prefix else key
        if isinstance(value, dict) and value:
            yield from _leaf_paths(value, path)
        else:
            yield path


def _in_upstream(path, tag):
    """A rendered path exists upstream, or sits below a map/list value the chart passes through."""
    keys = UPSTREAM_KEYS[tag]
    parts = path.split(".")
    return any(".".join(parts[:i]) in keys for i in range(1, len(parts) + 1)) or \
        any(k.startswith(path + ".") for k in keys)


def options(version, platform="generic", **extra):
    base = {"chart_version": version, "platform": platform, "gke_version": "1.33.2-gke.1111000"}
    base.update(extra)
    return base


# ---- values per version x platform -------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("platform", PRESETS)
def test_rendered_values_exist_in_the_upstream_chart_of_that_version(version, platform):
    full = options(version, platform, mig={"strategy": "mixed", "config": {"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}, "config_default": "all-disabled"},
        dcgm_exporter={"enabled": True, "service_monitor": True}, sandbox_workloads={"enabled": True})
    if platform in ("generic", "openshift"):
        full.update(gds=True, gdrcopy=True, rdma={"mode": "auto"})
    plan = ops.gpu_operator_plan(full, {"gpu-1": host(), "gpu-2": host()})
    missing = [p for p in _leaf_paths(plan["chart"]["values"]) if not _in_upstream(p, version)]
    assert missing == [], "%s/%s renders keys the chart does not have: %s" % (version, platform, missing)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_catalog_keys_are_the_upstream_keys(version):
    keys = ops.gpu_operator_keys(version)
    upstream = UPSTREAM_KEYS[version]
    assert [k for k in keys if k not in upstream and not any(u.startswith(k + ".") for u in upstream)] == []


@pytest.mark.parametrize("version,key,value", [
    ("v24.9.2", "useOpenKernelModules", True), ("v25.3.4", "kernelModuleType", "open"),
    ("v25.10.1", "kernelModuleType", "open"), ("v26.3.0", "kernelModuleType", "open"),
])
def test_open_modules_use_the_key_of_the_version(version, key, value):
    plan = ops.gpu_operator_plan(options(version, driver={"kernel_module_type": "open"}))
    driver = plan["chart"]["values"]["driver"]
    assert driver[key] == value
    other = "kernelModuleType" if key == "useOpenKernelModules" else "useOpenKernelModules"
    assert other not in driver


def test_gds_and_dmabuf_turn_auto_modules_into_open_ones():
    plan = ops.gpu_operator_plan(options("v25.10.1", gds=True, rdma={"mode": "auto"}), {"a": host(), "b": host()})
    values = plan["chart"]["values"]
    assert values["driver"]["kernelModuleType"] == "open"
    assert values["gds"] == {"enabled": True}
    assert values["driver"]["rdma"] == {"enabled": False, "useHostMofed": True}
    assert plan["rdma"]["mode"] == "dmabuf"
    assert [s["container"] for s in plan["expect"]["driver_sidecars"]] == ["nvidia-fs-ctr"]


def test_peermem_enables_the_sidecar_with_the_networks_ofed():
    plan = ops.gpu_operator_plan(options("v25.3.4", rdma={"mode": "peermem", "use_host_mofed": False}),
                                 {"a": host(mode="peermem"), "b": host(mode="peermem")})
    assert plan["chart"]["values"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert plan["expect"]["driver_sidecars"] == [{"container": "nvidia-peermem-ctr",
                                                  "message": "successfully loaded nvidia-peermem module"}]


def test_the_plan_carries_the_names_the_role_waits_on():
    """The role reads the ClusterPolicy name and the driver pods' selector from here, never as literals of its own."""
    plan = ops.gpu_operator_plan(options("v25.10.1"), {})
    assert plan["names"] == {"cluster_policy": "cluster-policy", "driver_selector": "app=nvidia-driver-daemonset",
                             "gpu_resource": "nvidia.com/gpu"}


def test_gke_preset_follows_the_published_recipe():
    plan = ops.gpu_operator_plan(options("v25.10.1", "gke", gke_version="1.33.4-gke.1000000"))
    values = plan["chart"]["values"]
    assert values["driver"] == {"enabled": False}
    assert values["hostPaths"]["driverInstallDir"] == values["toolkit"]["installDir"] == "/home/kubernetes/bin/nvidia"
    assert values["cdi"] == {"enabled": True}
    assert values["toolkit"]["env"] == [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    assert values["migManager"]["env"] == [{"name": "WITH_REBOOT", "value": "true"}]
    quota = plan["objects"][0]
    assert quota["kind"] == "ResourceQuota" and quota["metadata"]["namespace"] == "gpu-operator"
    scope = quota["spec"]["scopeSelector"]["matchExpressions"][0]
    assert scope["values"] == ["system-node-critical", "system-cluster-critical"]
    older = ops.gpu_operator_plan(options("v25.10.1", "gke", gke_version="1.32.9-gke.1"))["chart"]["values"]
    assert "env" not in older["toolkit"]


def test_aks_and_openshift_presets():
    aks = ops.gpu_operator_plan(options("v25.3.4", "aks"))["chart"]["values"]
    assert aks["driver"] == {"enabled": False} and aks["toolkit"] == {"enabled": False}
    assert aks["operator"] == {"runtimeClass": "nvidia-container-runtime"}
    none_pool = ops.gpu_operator_plan(options("v25.3.4", "aks", aks_driver="operator"))["chart"]["values"]
    assert none_pool["driver"]["enabled"] is True and "operator" not in none_pool
    shift = ops.gpu_operator_plan(options("v25.3.4", "openshift"))
    assert shift["namespace"] == "nvidia-gpu-operator" and shift["chart"]["values"]["platform"] == {"openshift": True}


def test_sharing_builds_a_device_plugin_config():
    plan = ops.gpu_operator_plan(options("v25.10.1", mig={"strategy": "none"},
                                         device_plugin={"sharing": {"strategy": "time-slicing", "replicas": 4}}))
    config = plan["chart"]["values"]["devicePlugin"]["config"]
    assert config["create"] is True and config["default"] == "shared"
    body = json.loads(config["data"]["shared"])
    assert body["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


def test_driver_pools_before_v25_3_choose_their_modules_with_use_open_kernel_modules():
    # the v24.9.2 NVIDIADriver CRD has no kernelModuleType: the API server would prune it and the pool would get the
    # chart's default (proprietary) modules
    plan = ops.gpu_operator_plan(options("v24.9.2", driver_pools=[
        {"name": "a", "node_selector": {"p": "a"}, "kernel_module_type": "open"},
        {"name": "b", "node_selector": {"p": "b"}, "kernel_module_type": "proprietary"},
        {"name": "c", "node_selector": {"p": "c"}}]))
    specs = [o["spec"] for o in plan["objects"] if o["kind"] == "NVIDIADriver"]
    assert [s.get("useOpenKernelModules") for s in specs] == [True, False, None]
    assert not any("kernelModuleType" in s for s in specs)


def test_driver_pools_become_nvidiadriver_resources():
    plan = ops.gpu_operator_plan(options("v25.10.1", driver_pools=[
        {"name": "h100", "node_selector": {"pool": "h100"}, "version": "570.124.06"},
        {"name": "l4", "node_selector": {"pool": "l4"}, "kernel_module_type": "proprietary", "precompiled": True}]))
    assert plan["chart"]["values"]["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}
    crs = plan["objects"]
    assert [c["metadata"]["name"] for c in crs] == ["h100", "l4"]
    assert "kernelModuleType" not in crs[0]["spec"] and crs[1]["spec"]["kernelModuleType"] == "proprietary" and crs[1]["spec"]["usePrecompiled"] is True


def pool_options(**pool):
    """One driver pool with the given settings (a name and a node selector unless given)."""
    return options("v25.10.1", driver_pools=[dict({"name": "a", "node_selector": {"p": "x"}}, **pool)])


def test_driver_pool_features_go_into_the_resource_as_the_crd_names_them():
    features = {"rdma": {"enabled": True, "useHostMofed": False},
                "gds": {"enabled": True, "version": "2.20.5", "imagePullPolicy": "IfNotPresent", "args": ["-v"]},
                "gdrcopy": {"enabled": True, "env": [{"name": "GDRCOPY_DEBUG", "value": "1"}], "imagePullSecrets": ["ngc"]}}
    spec = ops.gpu_operator_plan(pool_options(**features))["objects"][0]["spec"]
    assert {key: spec[key] for key in features} == features


def test_a_series_resolves_to_its_pinned_release():
    assert ops.gpu_operator_plan(options("v25.3"))["chart"]["chart_version"] == "v25.3.4"
    assert ops.gpu_operator_plan(options("25.3.2"))["chart"]["chart_version"] == "v25.3.2"


# ---- refusals -----------------------------------------------------------------------------------

BAD = [
    (options("v23.9.0"), {}, "chart_version"),
    (options("v24.9.2", values={"driver": {"kernelModuleType": "open"}}), {}, "driver.kernelModuleType (added in v25.3"),
    (options("v25.3.4", values={"driver": {"useOpenKernelModules": True}}), {}, "v25.3.4 has no value driver.useOpenKernelModules"),
    (options("v25.10.1", values={"cdi": {"default": True}}), {}, "cdi.default"),
    (options("v25.10.1", values={"drivr": {"enabled": True}}), {}, "drivr.enabled"),
    (options("v24.9.2", driver={"kernel_module_type": "auto"}), {}, "v24.9.2"),
    (options("v25.10.1", driver={"kernel_module_type": "auto", "version": "550.144.03"}), {}, "driver.kernel_module_type auto"),
    (options("v25.10.1", gds=True, driver={"kernel_module_type": "proprietary"}), {}, "GPUDirect Storage"),
    (options("v25.10.1", rdma={"mode": "dmabuf"}, driver={"kernel_module_type": "proprietary"}),
     {"a": host()}, "DMA-BUF"),
    (options("v25.10.1", rdma={"mode": "dmabuf"}), {"a": host(mode="peermem", dmabuf=False)}, "kernel 5.4.0 is older"),
    (options("v25.10.1", rdma={"mode": "peermem"}), {"a": host(ofed=False)}, "MLNX_OFED/DOCA-OFED is not installed"),
    (options("v25.10.1", rdma={"mode": "auto"}), {"a": host(), "b": host(mode="peermem")}, "do not agree"),
    (options("v25.10.1", rdma={"mode": "peermem"}), {}, "gpu_host facts"),
    (options("v25.10.1", rdma={"mode": "sometimes"}), {}, "rdma.mode"),
    (options("v25.10.1", rdma={"mode": "dmabuf", "use_host_mofed": True}), {"a": host(ofed=False)}, "rdma.use_host_mofed"),
    (options("v25.10.1", "gke", driver={"enabled": True}), {}, "driver.enabled"),
    (options("v25.10.1", "gke", gds=True), {}, "gds"),
    (options("v25.10.1", "aks", rdma={"mode": "peermem"}), {"a": host(mode="peermem")}, "peermem"),
    (options("v25.10.1", "gke", gke_version="latest"), {}, "gke_version"),
    (options("v25.10.1", platform="eks"), {}, "platform"),
    (options("v25.10.1", namespace="GPU_Operator"), {}, "namespace"),
    (options("v25.10.1", mig={"strategy": "all"}), {}, "mig.strategy"),
    (options("v25.10.1", mig={"strategy": "single"}, device_plugin={"sharing": {"strategy": "mps", "replicas": 2}}), {},
     "MPS is not supported on MIG"),
    (options("v25.10.1", mig={"strategy": "none"}, device_plugin={"sharing": {"strategy": "time-slicing", "replicas": 1}}),
     {}, "device_plugin.sharing.replicas"),
    (options("v25.10.1", mig={"config": {"version": "v1", "mig-configs": {"a": []}}, "config_default": "b"}), {},
     "mig.config_default"),
    (options("v25.10.1", mig={"config": {"version": "v1", "mig-configs": {"all-1g": []}}, "config_default": "all-1g"}), {},
     "mig.config_default 'all-1g': the ClusterPolicy accepts only 'all-disabled' or ''"),
    (options("v25.10.1", mig={"config": {"version": "v1", "mig-configs": {"a": []}}, "config_default": "all-disabled"}), {},
     "mig.config_default 'all-disabled' is not a configuration of mig.config (a)"),
    (options("v25.10.1", sandbox_workloads={"enabled": True, "default_workload": "vm"}), {},
     "sandbox_workloads.default_workload"),
    (options("v25.10.1", driver_pools=[{"name": "a", "node_selector": {}}]), {}, "driver_pools[0].node_selector"),
    (options("v25.10.1", driver_pools=[{"name": "a", "node_selector": {"p": "x"}}, {"name": "b", "node_selector": {"p": "x"}}]),
     {}, "driver_pools[1].node_selector"),
    (options("v25.10.1", driver_pools=[{"name": "Bad_Name", "node_selector": {"p": "x"}}]), {}, "driver_pools[0].name"),
    (options("v24.9.2", driver_pools=[{"name": "a", "node_selector": {"p": "x"}, "kernel_module_type": "auto"}]), {},
     "driver_pools[0].kernel_module_type"),
    (pool_options(node_selector={"pool": "h100 sxm"}), {}, "driver_pools[0].node_selector: pool: 'h100 sxm'"),
    (pool_options(rdma={"enabled": True, "useHostMOFED": True}), {},
     "driver_pools[0].rdma: unknown field useHostMOFED (the NVIDIADriver rdma fields: enabled, useHostMofed)"),
    (pool_options(rdma={"enabled": "yes"}), {}, "driver_pools[0].rdma.enabled must be true or false, got 'yes'"),
    (pool_options(gds=True), {}, "driver_pools[0].gds: must be a dict of enabled, repository"),
    (pool_options(gdrcopy={"enabled": True, "imagePullPolicy": "always"}), {},
     "driver_pools[0].gdrcopy.imagePullPolicy must be one of: Always, IfNotPresent, Never"),
    (pool_options(gdrcopy={"env": [{"value": "1"}]}), {}, "driver_pools[0].gdrcopy.env must be a list of {name, value}"),
    (pool_options(gds={"args": "--verbose"}), {}, "driver_pools[0].gds.args must be a list of non-empty strings"),
    # image references, in the options and in raw chart values
    (options("v25.10.1", values={"driver": {"repository": "NVCR.io/Nvidia"}}), {},
     "values.driver.repository: 'NVCR.io/Nvidia' is not an image reference"),
    (options("v25.10.1", values={"toolkit": {"image": "container-toolkit", "version": "v1.17.0 --privileged"}}), {},
     "values.toolkit.version: 'v1.17.0 --privileged' is not an image tag"),
    (options("v25.10.1", values={"devicePlugin": {"image": "k8s-device-plugin:v0.17.0;id"}}), {},
     "values.devicePlugin.image: 'k8s-device-plugin:v0.17.0;id' is not an image reference"),
    (options("v25.10.1", values={"driver": {"repository": "nvcr.io/nvidia"}}, driver={"version": "570.86.15;x"}), {},
     "values.driver.version: '570.86.15;x' is not an image tag"),
    (pool_options(repository="nvcr.io/nvidia/"), {}, "driver_pools[0].repository: 'nvcr.io/nvidia/' is not an image reference"),
    (pool_options(version="570.86.15 "), {}, "driver_pools[0].version: '570.86.15 ' is not an image tag"),
    (pool_options(gds={"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs",
                       "version": "2.20.5:latest"}), {},
     "driver_pools[0].gds.version: '2.20.5:latest' is not an image tag"),
]


@pytest.mark.parametrize("settings,hosts,fragment", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_gpu_operator_input_is_refused_naming_the_option(settings, hosts, fragment):
    with pytest.raises(inputs.OperatorInputError) as error:
        ops.gpu_operator_plan(settings, hosts)
    assert fragment in str(error.value)


def test_auto_on_hosts_without_rdma_turns_it_off_with_the_reasons():
    facts = host(mode="unsupported")
    facts["gpudirect_rdma"]["reasons"] = ["no RDMA device"]
    plan = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "auto"}), {"a": facts})
    assert plan["rdma"]["mode"] == "off" and "no RDMA device" in plan["rdma"]["notes"][0]
    assert plan["chart"]["values"]["driver"]["rdma"]["enabled"] is False


# ---- rdma.mode auto on fresh hosts (the operator installs the driver) ---------------------------------

def fresh(ofed=False, kernel="6.8.0-45-generic", device="0x2330"):
    """gpu_host facts of a host without an NVIDIA driver yet: the GPU only on the PCI bus."""
    facts = host(mode="unsupported", ofed=ofed)
    facts.update(nvidia_smi={"present": False, "path": None}, driver_version=None, cuda_version=None, gpus=[],
                 kernel_version=kernel, kernel_module={"type": None, "version": None},
                 pci_gpus=[{"address": "0000:18:00.0", "device": device}],
                 modules_loaded={"nvidia_peermem": False, "nvidia_fs": False, "gdrdrv": False, "ib_core": True})
    facts["gpudirect_rdma"]["reasons"] = ["no NVIDIA GPU found"]  # what the facts' own rule says without a driver
    return facts


FRESH_CASES = [
    # (chart, options, hosts, mode, driver values expected, note fragment)
    ("v25.10.1", {}, {"gpu-a": fresh()}, "dmabuf", {"kernelModuleType": "open", "rdma": {"enabled": False, "useHostMofed": False}},
     "gpu-a: dmabuf for the driver GPU Operator chart v25.10.1 installs (the NVIDIA driver is not installed yet: "
     "decided for driver 580.105.08"),
    ("v24.9.2", {}, {"gpu-a": fresh()}, "dmabuf", {"useOpenKernelModules": True}, "decided for driver 550.144.03"),
    ("v25.3.4", {"driver": {"kernel_module_type": "proprietary"}}, {"gpu-a": fresh(ofed=True)}, "peermem",
     {"kernelModuleType": "proprietary", "rdma": {"enabled": True, "useHostMofed": True}},
     "not chosen: dmabuf: driver.kernel_module_type is proprietary"),
    ("v25.10.1", {"driver": {"kernel_module_type": "proprietary"}}, {"gpu-a": fresh()}, "off",
     {"kernelModuleType": "proprietary", "rdma": {"enabled": False, "useHostMofed": False}},
     "GPUDirect RDMA is off: no GPU host supports it"),
    ("v25.10.1", {}, {"gpu-a": fresh(ofed=True, kernel="5.4.0-150-generic")}, "peermem", {"rdma": {"enabled": True, "useHostMofed": True}},
     "kernel 5.4.0-150-generic is older than 5.12"),
    ("v25.10.1", {"driver": {"version": "510.47.03", "kernel_module_type": "open"}}, {"gpu-a": fresh(ofed=True)}, "peermem",
     {"version": "510.47.03"}, "driver 510.47.03 is older than 515.43.04"),
    ("v25.10.1", {}, {"gpu-a": fresh(ofed=True, device="0x1db1")}, "peermem", {"rdma": {"enabled": True, "useHostMofed": True}},
     "(PCI device 10de:1db1) is older than Turing"),
    ("v25.10.1", {}, {"gpu-a": fresh(), "gpu-b": host(mode="dmabuf", ofed=False)}, "dmabuf", {"kernelModuleType": "open"},
     "gpu-a: dmabuf for the driver"),
    # AKS with its preinstalled driver: the operator installs none, so the facts' own verdict stands
    ("v25.10.1", {"platform": "aks"}, {"gpu-a": fresh()}, "off", {"enabled": False}, "GPUDirect RDMA is off"),
]


@pytest.mark.parametrize("version, settings, hosts, mode, driver_values, note", FRESH_CASES)
def test_auto_rdma_on_fresh_hosts_decides_for_the_operators_driver(version, settings, hosts, mode, driver_values, note):
    plan = ops.gpu_operator_plan(dict(options(version), rdma={"mode": "auto"}, **settings), hosts)
    assert plan["rdma"]["mode"] == mode, plan["rdma"]
    driver = plan["chart"]["values"]["driver"]
    assert {k: driver.get(k) for k in driver_values} == driver_values
    assert any(note in n for n in plan["rdma"]["notes"]), plan["rdma"]["notes"]


def test_forced_dmabuf_on_a_fresh_host_is_judged_for_the_operators_driver():
    with pytest.raises(inputs.OperatorInputError) as error:
        ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "dmabuf"}, driver={"kernel_module_type": "proprietary"}),
                              {"gpu-a": fresh()})
    assert "rdma.mode dmabuf is not supported on gpu-a (driver.kernel_module_type is proprietary" in str(error.value)
    plan = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "dmabuf"}), {"gpu-a": fresh()})
    assert plan["rdma"]["mode"] == "dmabuf" and plan["chart"]["values"]["driver"]["kernelModuleType"] == "open"


# ---- MOFED from the Network Operator's container (rdma.use_host_mofed false) -------------------------

def running_without_ofed():
    """A host with the proprietary driver running (DMA-BUF is out) and no MOFED: peermem waits for an OFED."""
    facts = host(mode="unsupported", ofed=False, module="proprietary", dmabuf=False)
    facts["gpudirect_rdma"]["reasons"] = ["dmabuf: the NVIDIA kernel modules are proprietary",
                                          "peermem: neither MOFED nor DOCA-OFED is installed (nvidia-peermem needs one)"]
    return facts


@pytest.mark.parametrize("hosts", [{"gpu-a": running_without_ofed()}, {"gpu-a": fresh(kernel="5.4.0-150-generic")}],
                         ids=["driver-running", "fresh"])
def test_container_ofed_makes_peermem_possible_on_hosts_without_mofed(hosts):
    # the host's own MOFED decides while use_host_mofed is unset: none, so auto turns RDMA off
    plan = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "auto"}), hosts)
    assert plan["rdma"]["mode"] == "off"
    # use_host_mofed false: the Network Operator brings the OFED driver container, so peermem fits
    plan = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "auto", "use_host_mofed": False}), hosts)
    assert plan["rdma"]["mode"] == "peermem", plan["rdma"]
    assert plan["chart"]["values"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert any("Network Operator's DOCA-OFED" in note for note in plan["rdma"]["notes"]), plan["rdma"]["notes"]
    # and a forced peermem is accepted for the same reason, refused without it
    forced = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "peermem", "use_host_mofed": False}), hosts)
    assert forced["rdma"]["mode"] == "peermem"
    with pytest.raises(inputs.OperatorInputError, match="rdma.mode peermem is not supported on gpu-a"):
        ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "peermem"}), hosts)


def test_container_ofed_does_not_invent_rdma_devices():
    facts = running_without_ofed()
    facts["rdma_devices"] = []
    plan = ops.gpu_operator_plan(options("v25.10.1", rdma={"mode": "auto", "use_host_mofed": False}), {"gpu-a": facts})
    assert plan["rdma"]["mode"] == "off" and "no RDMA device" in plan["rdma"]["notes"][0]


def test_plans_do_not_share_state():
    settings = options("v25.10.1", values={"driver": {"env": [{"name": "A", "value": "1"}]}})
    frozen = copy.deepcopy(settings)
    first = ops.gpu_operator_plan(settings)
    first["chart"]["values"]["driver"]["env"].append({"name": "B"})
    assert settings == frozen and ops.gpu_operator_plan(settings)["chart"]["values"]["driver"]["env"] == [{"name": "A", "value": "1"}]
