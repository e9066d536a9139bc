# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU Operator / Network Operator catalog: values per chart version and platform, refusals, parsers.

fixtures/gpu_operator/values_keys.json holds the leaf key paths of the upstream chart's values.yaml at
each pinned tag (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml); rendered values are
compared with it, independently of the catalog's own key table.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpu_operator
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_plan as ops
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import network_operator_plan
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import readiness
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _perftest
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host as host

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "gpu_operator", "values_keys.json"), encoding="utf-8") as _handle:
    UPSTREAM_KEYS = json.load(_handle)["tags"]

VERSIONS = ["v24.9.2", "v25.3.4", "v25.10.1", "v26.3.0"]
PRESETS = ["generic", "gke", "aks", "openshift"]

GUIDE_OUTPUT = """
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 2          5000             0.11               0.11               6.897101
 65536      5000             92.39              92.38              0.176196
 8388608    5000             92.39              92.39              0.001377
---------------------------------------------------------------------------------------
"""


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


# ---- Network Operator -----------------------------------------------------------------------------

def net_options(version, **extra):
    base = {"chart_version": version, "ip_pools": [{"name": "rdma-pool", "subnet": "192.168.2.0/24", "gateway": "192.168.2.1"}],
            "networks": [{"kind": "macvlan", "name": "rdma-net", "master": "ens64np1", "ip_pool": "rdma-pool",
                          "range": "192.168.2.225/28"}]}
    base.update(extra)
    return base


def test_network_operator_ipam_follows_the_chart_version():
    new = network_operator_plan.network_operator_plan(net_options("25.10.0"), {"a": host()})
    assert new["ipam"] == "nv-ipam" and "nvIpam" in new["nic_cluster_policy"]["spec"]
    assert json.loads(new["networks"][0]["spec"]["ipam"]) == {"type": "nv-ipam", "poolName": "rdma-pool"}
    assert new["ip_pools"][0]["spec"] == {"subnet": "192.168.2.0/24", "perNodeBlockSize": 16, "gateway": "192.168.2.1"}
    old = network_operator_plan.network_operator_plan(net_options("25.7.0", ip_pools=[]), {"a": host()})
    assert old["ipam"] == "whereabouts"
    assert old["nic_cluster_policy"]["spec"]["secondaryNetwork"]["ipamPlugin"]["image"] == "whereabouts"
    assert json.loads(old["networks"][0]["spec"]["ipam"])["type"] == "whereabouts"


def test_nic_cluster_policy_carries_the_rdma_shared_device_plugin():
    plan = network_operator_plan.network_operator_plan(net_options("26.4", ofed={"source": "operator", "version": "doca3.2.0-25.10-1.2.8.0-2"},
                                                                   rdma_shared_device_plugin={"selectors": {"vendors": ["15b3"], "ifNames": ["ens64np1"]}}))
    spec = plan["nic_cluster_policy"]["spec"]
    assert plan["chart"]["chart_version"] == "26.4.1"
    assert spec["ofedDriver"]["version"] == "doca3.2.0-25.10-1.2.8.0-2"
    config = json.loads(spec["rdmaSharedDevicePlugin"]["config"])
    assert config["configList"][0]["resourceName"] == "rdma_shared_device_a"
    assert config["configList"][0]["selectors"]["ifNames"] == ["ens64np1"]
    assert spec["rdmaSharedDevicePlugin"]["version"] == "network-operator-v26.4.1"
    assert plan["rdma_resources"] == ["rdma/rdma_shared_device_a"]
    assert "state-OFED" in plan["expected_states"]


NET_BAD = [
    (net_options("24.1.0"), "chart_version"),
    (net_options("25.10.0", ipam="whereabouts"), "Whereabouts was removed"),
    (net_options("25.10.0", values={"deployCR": True}), "deployCR"),
    (net_options("25.10.0", ofed={"source": "operator"}), "ofed.version"),
    (net_options("25.10.0", networks=[{"kind": "macvlan", "name": "n", "ip_pool": "rdma-pool"}]), "networks[0].master"),
    (net_options("25.10.0", networks=[{"kind": "vxlan", "name": "n"}]), "networks[0].kind"),
    (net_options("25.10.0", networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "other"}]), "networks[0].ip_pool"),
    (net_options("25.10.0", networks=[{"kind": "hostdevice", "name": "n", "ip_pool": "rdma-pool"}]), "networks[0].resource_name"),
    (net_options("25.10.0", networks=[{"kind": "macvlan", "name": "n", "master": "e", "mode": "l2", "ip_pool": "rdma-pool"}]),
     "networks[0].mode"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0"}]), "ip_pools[0].subnet"),
    (net_options("25.10.0", rdma_shared_device_plugin={"selectors": {"vendor": ["15b3"]}}), "rdma_shared_device_plugin.selectors"),
    # an SR-IOV device plugin selector: the RDMA shared device plugin would drop it and take every Mellanox device
    (net_options("25.10.0", rdma_shared_device_plugin={"selectors": {"vendors": ["15b3"], "rootDevices": ["0000:18:00.0"]}}),
     "unknown selector rootDevices (allowed: vendors, deviceIDs, drivers, ifNames, linkTypes)"),
    (net_options("25.10.0", namespace="nvidia network"), "namespace"),
]


@pytest.mark.parametrize("settings,fragment", NET_BAD, ids=[str(i) for i in range(len(NET_BAD))])
def test_bad_network_operator_input_is_refused_naming_the_option(settings, fragment):
    with pytest.raises(inputs.OperatorInputError) as error:
        network_operator_plan.network_operator_plan(settings, {"a": host()})
    assert fragment in str(error.value)


def test_host_mofed_must_be_installed_for_the_host_source():
    with pytest.raises(inputs.OperatorInputError, match="ofed.source host: MLNX_OFED/DOCA-OFED is not installed on b"):
        network_operator_plan.network_operator_plan(net_options("25.10.0"), {"a": host(), "b": host(ofed=False)})


# ---- readiness ------------------------------------------------------------------------------------

def _pod(name, node, component, ready, reason=None):
    state = {"running": {}} if ready else {"waiting": {"reason": reason or "CrashLoopBackOff"}}
    return {"metadata": {"name": name, "ownerReferences": [{"kind": "DaemonSet", "name": component}]},
            "spec": {"nodeName": node},
            "status": {"phase": "Running" if ready else "Pending",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"name": "main", "ready": ready, "state": state}]}}


def test_readiness_names_the_component_and_node_that_are_not_ready():
    policy = {"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "status": {"state": "notReady"}}
    report = readiness.readiness_report(policy, [_pod("drv-a", "gpu-1", "nvidia-driver-daemonset", True),
                                                 _pod("drv-b", "gpu-2", "nvidia-driver-daemonset", False, "ImagePullBackOff")])
    assert report["ready"] is False
    assert report["summary"][0] == "ClusterPolicy/cluster-policy is notReady"
    assert "nvidia-driver-daemonset not ready on node gpu-2 (pod drv-b: main ImagePullBackOff)" in report["summary"]
    ncp = {"kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"}, "status": {"state": "notReady", "appliedStates": [
        {"name": "state-OFED", "state": "notReady", "message": "waiting for driver"}, {"name": "state-multus-cni", "state": "ready"}]}}
    assert readiness.readiness_report(ncp)["summary"][1] == "component state-OFED is notReady: waiting for driver"


def test_driver_pod_report_wants_the_sidecars_and_their_messages():
    pod = {"metadata": {"name": "nvidia-driver-daemonset-x"}, "spec": {"nodeName": "gpu-1", "containers": [
        {"name": "nvidia-driver-ctr"}, {"name": "nvidia-peermem-ctr"}]},
        "status": {"containerStatuses": [{"name": "nvidia-driver-ctr", "ready": True}, {"name": "nvidia-peermem-ctr", "ready": True}]}}
    sidecars = [gpu_operator.DRIVER_SIDECARS["peermem"], gpu_operator.DRIVER_SIDECARS["gds"]]
    problems = readiness.driver_pod_report([pod], sidecars, {"nvidia-driver-daemonset-x/nvidia-peermem-ctr": "waiting for mellanox ofed"})
    assert problems == ["nvidia-driver-daemonset-x on node gpu-1: the nvidia-peermem-ctr log does not say "
                        "'successfully loaded nvidia-peermem module'",
                        "nvidia-driver-daemonset-x on node gpu-1 has no nvidia-fs-ctr container"]
    ok = readiness.driver_pod_report([pod], sidecars[:1], {"nvidia-driver-daemonset-x/nvidia-peermem-ctr":
                                                           "waiting...\nsuccessfully loaded nvidia-peermem module\n"})
    assert ok == []


# ---- perftest -------------------------------------------------------------------------------------

def test_ib_write_bw_guide_output():
    with open(os.path.join(FIXTURES, "perftest", "guide_ib_write_bw_dmabuf.txt"), encoding="utf-8") as handle:
        result = _perftest.parse_ib_write_bw(handle.read())
    assert result["unit"] == "Gb/sec" and result["device"] == "mlx5_0" and result["link_type"] == "Ethernet"
    assert len(result["rows"]) == 23
    assert result["rows"][15] == {"bytes": 65536, "iterations": 5000, "bw_peak_gbps": 92.39, "bw_average_gbps": 92.38,
                                  "msg_rate_mpps": 0.176196}
    assert result["bw_average_gbps"] == 92.39 and result["max_bw_average_gbps"] == 92.46


def test_ib_write_bw_megabytes_tabs_and_warnings():
    text = ("Conflicting CPU frequency values detected: 1500.000000 != 3000.000000. CPU Frequency is not max.\n"
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            "Conflicting CPU frequency values detected: 1500.000000 != 3000.000000. CPU Frequency is not max.\n"
            " 65536\t5000\t11548.00\t11547.50\t0.184760\n")
    result = _perftest.parse_ib_write_bw(text)
    assert result["unit"] == "MB/sec" and result["bw_average_gbps"] == pytest.approx(92.38)


def test_ib_write_bw_without_a_table_is_an_error():
    with pytest.raises(inputs.OperatorInputError, match="no ib_write_bw result table"):
        _perftest.parse_ib_write_bw("Couldn't connect to 192.168.2.226:18515\nUnable to init the socket connection")


def test_threshold_is_a_fraction_of_the_slowest_link():
    assert _perftest.rdma_threshold({"a": host(rate=200), "b": host(rate=100)}, fraction=0.8) == (80.0, 100.0, "mlx5_0")
    assert _perftest.rdma_threshold({"a": host()}, threshold=50) == (50.0, None, None)
    with pytest.raises(inputs.OperatorInputError, match="mlx5_9"):
        _perftest.rdma_threshold({"a": host()}, device="mlx5_9")
    with pytest.raises(inputs.OperatorInputError, match="threshold_fraction"):
        _perftest.rdma_threshold({"a": host()}, fraction=1.5)


def test_the_guide_result_passes_the_default_threshold_of_its_100g_link():
    threshold, dummy, dummy = _perftest.rdma_threshold({"a": host(rate=100)})
    assert _perftest.parse_ib_write_bw(GUIDE_OUTPUT)["bw_average_gbps"] >= threshold


def test_plans_do_not_share_state():
    settings = options("v25.10.1", values={"driver": {"env": [{"name": "A", "value": "1"}]}})
    frozen = copy.deepcopy(settings)
    first = ops.gpu_operator_plan(settings)
    first["chart"]["values"]["driver"]["env"].append({"name": "B"})
    assert settings == frozen and ops.gpu_operator_plan(settings)["chart"]["values"]["driver"]["env"] == [{"name": "A", "value": "1"}]


def test_node_report_names_missing_labels_and_gpus():
    expect = ops.gpu_operator_plan(options("v25.10.1"))["expect"]
    good = {"metadata": {"name": "gpu-1", "labels": dict(expect["labels"])}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    short = {"metadata": {"name": "gpu-2", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"allocatable": {}}}
    gpu_hosts = {"facts": {"h1": host(), "h2": host()}, "nodes": {"h1": "gpu-1", "h2": "gpu-2", "h3": "gpu-3"}}
    problems = readiness.node_report([good, short], gpu_hosts, expect)
    assert problems[0].startswith("node gpu-2: labels nvidia.com/gpu.deploy.container-toolkit=(missing)")
    assert problems[1] == "node gpu-2: allocatable nvidia.com/gpu is 0, expected at least 8"
    assert problems[2] == "node gpu-3 does not exist"
    assert len(problems) == 3


def test_driver_pod_report_reads_k8s_log_loop_results():
    pod = {"metadata": {"name": "drv"}, "spec": {"nodeName": "gpu-1", "containers": [{"name": "nvidia-peermem-ctr"}]},
           "status": {"containerStatuses": [{"name": "nvidia-peermem-ctr", "ready": True}]}}
    sidecar = gpu_operator.DRIVER_SIDECARS["peermem"]
    results = [{"item": [pod, sidecar], "log": "successfully loaded nvidia-peermem module"}]
    assert readiness.driver_pod_report([pod], [sidecar], results) == []
    assert readiness.driver_pod_report([pod], [sidecar], [{"item": [pod, sidecar], "failed": True}]) != []


# helm's kubeVersion check leaves pre-release server versions out unless the constraint has a pre-release ("-0")
KUBE_VERSIONS = [
    (">= 1.21.0", "v1.33.5-gke.1234", True),  # GKE
    (">= 1.21.0", "v1.34.3-eks-ac2d5a0", True),  # EKS
    (">= 1.21.0", "v1.27.1-3443+19254894103e33-dirty", True),  # pre-release and build metadata
    (">= 1.21.0-0", "v1.33.5-gke.1234", False),  # the fix from network-operator 26.1.0
    (">=1.16.0-0 <1.40.0-0", "v1.33.5-gke.1234", False),
    (">= 1.21.0", "v1.33.5", False),  # a release version: the range is helm's business
    (">= 1.21.0", "v1.33.5+k3s1", False),  # build metadata alone is no pre-release
    ("", "v1.33.5-gke.1234", False),  # no kubeVersion, no check
]


@pytest.mark.parametrize("constraint,server,refused", KUBE_VERSIONS, ids=[s for dummy, s, dummy2 in KUBE_VERSIONS])
def test_kube_version_refusal_is_helms_prerelease_rule(constraint, server, refused):
    message = network_operator_plan.kube_version_refusal("network-operator 25.10.0", constraint, server)
    assert bool(message) is refused
    if refused:
        assert "network-operator 25.10.0 declares kubeVersion '%s'" % constraint in message and server in message


@pytest.mark.parametrize("constraint,refused", [
    (">= 1.21.0", True), (">= 1.21.0-0", False), ("", False), (">=1.16.0-0 <1.40.0-0", False), ("^1.28.0", True)])
def test_kube_version_refusal_without_a_server_judges_any_prerelease(constraint, refused):
    assert network_operator_plan.refuses_prerelease(constraint) is refused
    message = network_operator_plan.kube_version_refusal("network-operator 25.10.0", constraint)
    assert bool(message) is refused
    if refused:
        assert "declares kubeVersion '%s'" % constraint in message and "pre-release" in message


def test_network_operator_charts_before_26_1_declare_no_prerelease():
    """Upstream Chart.yaml kubeVersion per series: '>= 1.21.0' up to 25.10.0, '>= 1.21.0-0' from 26.1.0."""
    plans = {v: network_operator_plan.network_operator_plan({"chart_version": v}, {}) for v in ("25.4.0", "25.10.0", "26.4.1")}
    assert {v: p["kube_version"] for v, p in plans.items()} == {
        "25.4.0": ">= 1.21.0", "25.10.0": ">= 1.21.0", "26.4.1": ">= 1.21.0-0"}
    assert network_operator_plan.kube_version_refusal("x", plans["25.10.0"]["kube_version"], "v1.33.5-gke.1234")
    assert not network_operator_plan.kube_version_refusal("x", plans["26.4.1"]["kube_version"], "v1.33.5-gke.1234")
