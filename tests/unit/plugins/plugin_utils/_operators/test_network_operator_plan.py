# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Network Operator plan (plugins/plugin_utils/_operators/network_operator_plan.py): values per chart version, refusals."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import network_operator_plan
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host as host


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


@pytest.mark.parametrize("version,doca", [("25.4", "25.04-0.6.1.0-2"), ("25.7.0", "doca3.1.0-25.07-0.9.7.0-0"),
                                          ("25.10", "doca3.2.0-25.10-1.2.8.0-2"), ("26.4.1", "doca3.4.1-26.04-1.1.0.0-1")])
def test_every_series_pins_the_doca_driver_of_its_release(version, doca):
    # hack/release.yaml "Mofed" at each pinned tag (Mellanox/network-operator)
    plan = network_operator_plan.network_operator_plan(net_options(version, ip_pools=[], networks=[], ofed={"source": "operator"}))
    driver = plan["nic_cluster_policy"]["spec"]["ofedDriver"]
    assert (driver["repository"], driver["image"], driver["version"]) == ("nvcr.io/nvidia/mellanox", "doca-driver", doca)


def test_25_4_components_keep_their_projects_registries_and_tags():
    # hack/release.yaml at v25.4.0: the shared nvcr.io/nvidia/mellanox network-operator-v<release> scheme starts in 25.7
    plan = network_operator_plan.network_operator_plan(net_options("25.4", ip_pools=[], networks=[
        {"kind": "ipoib", "name": "ib", "master": "ibs1", "range": "10.0.0.0/24"}]))
    spec = plan["nic_cluster_policy"]["spec"]
    images = {key: (c["repository"], c["image"], c["version"]) for key, c in
              list(spec.items()) + list(spec["secondaryNetwork"].items()) if isinstance(c, dict) and "image" in c}
    assert images == {
        "rdmaSharedDevicePlugin": ("ghcr.io/mellanox", "k8s-rdma-shared-dev-plugin", "v1.5.3"),
        "multus": ("ghcr.io/k8snetworkplumbingwg", "multus-cni", "v4.1.0"),
        "cniPlugins": ("ghcr.io/k8snetworkplumbingwg", "plugins", "v1.6.2-update.1"),
        "ipoib": ("ghcr.io/mellanox", "ipoib-cni", "v1.2.2"),
        "ipamPlugin": ("ghcr.io/k8snetworkplumbingwg", "whereabouts", "v0.7.0"),
    }
    later = network_operator_plan.network_operator_plan(net_options("25.7.1", ip_pools=[], networks=[]))
    assert later["nic_cluster_policy"]["spec"]["secondaryNetwork"]["multus"] == {
        "image": "multus-cni", "repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v25.7.1"}


def test_26_4_has_no_keep_ncp_value():
    # keepNCP arrives in the 26.7 chart: 26.4.1's values.yaml and templates have none, helm would ignore it
    with pytest.raises(inputs.OperatorInputError, match="has no top-level value keepNCP"):
        network_operator_plan.network_operator_plan(net_options("26.4", values={"keepNCP": True}), {"a": host()})


NET_BAD = [
    (net_options("24.1.0"), "chart_version"),
    (net_options("25.10.0", ipam="whereabouts"), "Whereabouts was removed"),
    (net_options("25.10.0", values={"deployCR": True}), "deployCR"),
    # the catalog's DOCA driver is the pinned release's (26.4.1 ships doca3.4.1-..., 26.4.0 doca3.4.0-...)
    (net_options("26.4.0", ofed={"source": "operator"}), "ofed.version: the catalog's DOCA driver (doca3.4.1-26.04-1.1.0.0-1) "
     "is the one of Network Operator 26.4.1; set the doca-driver image tag of 26.4.0"),
    # 25.4.0 lists its own component images; another 25.4 release would ship others
    (net_options("25.4.1", ip_pools=[], ipam="whereabouts"), "images are known for the catalog's release 25.4.0 only, not 25.4.1"),
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
    # IP pools as nv-ipam's IPPool webhook checks them (ippool_validate.go), and Linux interface names
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.256/24"}]),
     "ip_pools[0].subnet: '10.0.0.256/24' is not an IPv4 CIDR (a.b.c.d/0-32, each part 0-255)"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/33"}]), "ip_pools[0].subnet: '10.0.0.0/33' is not an IPv4"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/32"}]),
     "ip_pools[0].subnet: 10.0.0.0/32 has 1 usable address"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/28", "per_node_block_size": 15}]),
     "ip_pools[0].per_node_block_size must be between 2 and 14 (the usable addresses of 10.0.0.0/28), got 15"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/31", "per_node_block_size": 3}]),
     "must be between 2 and 2"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/24", "per_node_block_size": True}]),
     "per_node_block_size must be between 2 and 254"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/24", "gateway": "10.0.1.1"}]),
     "ip_pools[0].gateway: 10.0.1.1 is outside the pool's subnet 10.0.0.0/24"),
    (net_options("25.10.0", ip_pools=[{"name": "p", "subnet": "10.0.0.0/24", "gateway": "10.0.0.300"}]),
     "ip_pools[0].gateway: '10.0.0.300' is not an IPv4 address"),
    (net_options("25.10.0", networks=[{"kind": "macvlan", "name": "n", "master": "ens64np1;ls", "ip_pool": "rdma-pool"}]),
     "networks[0].master: 'ens64np1;ls' is not 1 to 15 letters"),
    (net_options("25.10.0", networks=[{"kind": "ipoib", "name": "n", "master": "ib0-with-a-long-name", "ip_pool": "rdma-pool"}]),
     "networks[0].master: 'ib0-with-a-long-name' is not 1 to 15"),
    (net_options("25.7.0", ip_pools=[], networks=[{"kind": "macvlan", "name": "n", "master": "e", "range": "192.168.2/24"}]),
     "networks[0].range: '192.168.2/24' is not an IPv4 CIDR"),
    (net_options("25.7.0", ip_pools=[], networks=[{"kind": "macvlan", "name": "n", "master": "e", "range": "192.168.2.0/24",
                                                   "exclude": ["192.168.2.0/28", "192.168.2.300/32"]}]),
     "networks[0].exclude[1]: '192.168.2.300/32' is not an IPv4 CIDR"),
    (net_options("25.10.0", rdma_shared_device_plugin={"selectors": {"ifNames": ["ens64np1", "ens 1"]}}),
     "rdma_shared_device_plugin.selectors.ifNames: 'ens 1' is not 1 to 15"),
    (net_options("25.10.0", values={"operator": {"repository": "nvcr.io/nvidia/cloud-native", "image": "network-operator",
                                                 "tag": "v25.10.0 "}}), "values.operator.tag: 'v25.10.0 ' is not an image tag"),
    (net_options("25.10.0", ofed={"source": "operator", "repository": "Mellanox", "version": "doca3.2.0"}),
     "ofed.repository: 'Mellanox' is not an image reference"),
    (net_options("25.10.0", ofed={"source": "operator", "version": "doca3.2.0/../x"}), "ofed.version: 'doca3.2.0/../x' is not an image tag"),
]


@pytest.mark.parametrize("settings,fragment", NET_BAD, ids=[str(i) for i in range(len(NET_BAD))])
def test_bad_network_operator_input_is_refused_naming_the_option(settings, fragment):
    with pytest.raises(inputs.OperatorInputError) as error:
        network_operator_plan.network_operator_plan(settings, {"a": host()})
    assert fragment in str(error.value)


@pytest.mark.parametrize("pool, spec", [
    ({"name": "p", "subnet": "10.0.0.0/28", "per_node_block_size": 14}, {"subnet": "10.0.0.0/28", "perNodeBlockSize": 14}),
    ({"name": "p", "subnet": "10.0.0.0/31", "per_node_block_size": 2}, {"subnet": "10.0.0.0/31", "perNodeBlockSize": 2}),
    ({"name": "p", "subnet": "10.0.0.5/24", "gateway": "10.0.0.254"},
     {"subnet": "10.0.0.5/24", "perNodeBlockSize": 16, "gateway": "10.0.0.254"}),
    ({"name": "p", "subnet": "10.0.0.0/24", "gateway": "10.0.0.0"},
     {"subnet": "10.0.0.0/24", "perNodeBlockSize": 16, "gateway": "10.0.0.0"}),
], ids=["block fills a /28", "point to point", "host bits as Go's ParseCIDR takes them", "gateway at the network address"])
def test_ip_pools_at_the_limits_are_taken(pool, spec):
    plan = network_operator_plan.network_operator_plan(
        net_options("25.10.0", ip_pools=[pool], networks=[{"kind": "macvlan", "name": "n", "master": "bond0.100", "ip_pool": "p"}]),
        {"a": host()})
    assert plan["ip_pools"][0]["spec"] == spec
    assert plan["networks"][0]["spec"]["master"] == "bond0.100"


def test_host_mofed_must_be_installed_for_the_host_source():
    with pytest.raises(inputs.OperatorInputError, match="ofed.source host: MLNX_OFED/DOCA-OFED is not installed on b"):
        network_operator_plan.network_operator_plan(net_options("25.10.0"), {"a": host(), "b": host(ofed=False)})


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


# ---- what the mutation check (scripts/mutate.py) showed untested: limits, defaults, key names ------------------

def _plan(**extra):
    return network_operator_plan.network_operator_plan(net_options("25.10.0", **extra), {"a": host()})


@pytest.mark.parametrize("settings, fragment", [
    (dict(rdma_shared_device_plugin={"rdma_hca_max": 0}), "rdma_hca_max must be between 1 and 1000, got 0"),
    (dict(rdma_shared_device_plugin={"rdma_hca_max": 1001}), "rdma_hca_max must be between 1 and 1000, got 1001"),
    (dict(rdma_shared_device_plugin={"rdma_hca_max": True}), "rdma_hca_max must be between 1 and 1000, got True"),
    (dict(rdma_shared_device_plugin={"resource_name": "rdma-a"}), "resource_name: 'rdma-a' must be lowercase"),
    (dict(rdma_shared_device_plugin={"selectors": {"vendors": ["15b3", ""]}}), "selectors.vendors must be a list of strings"),
    (dict(rdma_shared_device_plugin={"selectors": {"vendors": "15b3"}}), "selectors.vendors must be a list of strings"),
    (dict(networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "rdma-pool", "mtu": -1}]),
     "networks[0].mtu must be between 0 and 9216, got -1"),
    (dict(networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "rdma-pool", "mtu": 9217}]),
     "networks[0].mtu must be between 0 and 9216, got 9217"),
    (dict(networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "rdma-pool", "mtu": False}]),
     "networks[0].mtu must be between 0 and 9216, got False"),
    (dict(ip_pools=[{"name": "p", "subnet": "10.0.0.0/24", "per_node_block_size": 1}]),
     "ip_pools[0].per_node_block_size must be between 2 and 254"),
    (dict(ip_pools=[], networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "p"}]),
     "networks[0].ip_pool: 'p' is not one of network_operator ip_pools (none defined)"),
    (dict(networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "rdma-pool"},
                    {"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "rdma-pool"}]), "networks[1].name: n is defined twice"),
], ids=["hca 0", "hca 1001", "hca boolean", "resource name", "empty vendor", "vendors not a list", "mtu -1", "mtu 9217",
        "mtu boolean", "block of 1", "no pools", "network twice"])
def test_limits_of_the_network_operator_settings(settings, fragment):
    with pytest.raises(inputs.OperatorInputError) as error:
        _plan(**settings)
    assert fragment in str(error.value)


def test_limits_are_taken_and_defaults_written():
    plan = _plan(rdma_shared_device_plugin={"rdma_hca_max": 1000},
                 networks=[{"kind": "macvlan", "name": "a", "master": "e", "ip_pool": "rdma-pool", "mtu": 9216},
                           {"kind": "macvlan", "name": "b", "master": "e", "ip_pool": "rdma-pool", "mtu": 0},
                           {"kind": "macvlan", "name": "c", "master": "e", "ip_pool": "rdma-pool"}])
    config = json.loads(plan["nic_cluster_policy"]["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"][0]
    assert config["rdmaHcaMax"] == 1000 and config["selectors"] == {"vendors": ["15b3"]}
    assert [n["spec"]["mtu"] for n in plan["networks"]] == [9216, 0, 1500]
    assert [n["spec"]["mode"] for n in plan["networks"]] == ["bridge"] * 3
    default = _plan()
    config = json.loads(default["nic_cluster_policy"]["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"][0]
    assert config["rdmaHcaMax"] == 63 and _plan(rdma_shared_device_plugin={"rdma_hca_max": 1})["rdma_resources"]
    assert default["chart"]["values"]["nfd"] == {"enabled": True, "deployNodeFeatureRules": True}
    assert default["chart"]["values"]["sriovNetworkOperator"] == {"enabled": False}
    assert default["chart"]["release_name"] == "network-operator" and default["namespace"] == "nvidia-network-operator"
    assert "ipoib" not in default["nic_cluster_policy"]["spec"]["secondaryNetwork"]
    assert default["nic_cluster_policy"]["spec"]["nvIpam"]["enableWebhook"] is False
    other = _plan(nfd_enabled=False, sriov_network_operator=True, release_name="netop", ipoib=True,
                  rdma_shared_device_plugin={"enabled": False})
    assert other["chart"]["values"]["nfd"]["enabled"] is False and other["chart"]["values"]["sriovNetworkOperator"]["enabled"]
    assert other["chart"]["release_name"] == "netop" and other["rdma_resources"] == []
    assert "rdmaSharedDevicePlugin" not in other["nic_cluster_policy"]["spec"]
    assert other["nic_cluster_policy"]["spec"]["secondaryNetwork"]["ipoib"]["image"] == "ipoib-cni"
    values = {"operator": {"resources": {"limits": {"cpu": "1"}}}}
    assert network_operator_plan.check_network_operator_values(values, "25.10.0") is values


def test_the_operator_built_driver_carries_its_upgrade_policy_and_probes():
    """The doca-driver container's settings under their CRD key names (a change here changes every install's driver)."""
    spec = _plan(ofed={"source": "operator", "version": "doca3.2.0-25.10-1.2.8.0-2"})["nic_cluster_policy"]["spec"]
    assert spec["ofedDriver"] == {
        "image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox", "version": "doca3.2.0-25.10-1.2.8.0-2",
        "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                          "drain": {"enable": True, "force": True, "timeoutSeconds": 300, "deleteEmptyDir": True}},
        "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
        "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
        "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30}}
