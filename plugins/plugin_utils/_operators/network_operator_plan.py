# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The Network Operator plan (filter ``network_operator_plan``, role ``network_operator``).

Turns role options into chart values and NicClusterPolicy / network objects for the chosen chart version,
refusing (``OperatorInputError`` naming the option) what that version or the hosts cannot do, so the role
fails before anything is installed; judges a chart's ``kubeVersion`` against the server with helm's
pre-release rule (``kube_version_refusal``).
"""

from __future__ import annotations

import ipaddress
import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import interface_name_problem
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.network_operator import (
    DOCA_DRIVER_IMAGE, IPAM_PLUGINS, MACVLAN_MODES, MELLANOX_REPOSITORY, MELLANOX_VENDOR, NCP_STATES, NETWORK_KINDS,
    NETWORK_OPERATOR_CHART, NETWORK_OPERATOR_CHARTS, NETWORK_OPERATOR_REPO_URL, NIC_CLUSTER_POLICY_NAME,
    NV_IPAM_API, OFED_SOURCES, RDMA_RESOURCE_PREFIX, RDMA_SHARED_RESOURCE, RDMA_SHARED_SELECTORS,
    NETWORK_OPERATOR_COMMON_KEYS, component_image,
)
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import (
    OperatorInputError, _catalog_chart, _chart_source, _choice, _dns_label, _dns_subdomain, _hosts_with, _images,
    _merge, _pinned, require,
)


# --------------------------------------------------------------------------------------------
# Network Operator
# --------------------------------------------------------------------------------------------

def network_operator_chart(version):
    """(series, catalog entry) of a network-operator chart version; refuses versions outside the catalog."""
    return _catalog_chart(NETWORK_OPERATOR_CHARTS, "Network Operator", version, shown=lambda series: series.lstrip("v"))


def network_operator_keys(version):
    """The top-level value keys that network-operator chart ``version`` accepts."""
    dummy, entry = network_operator_chart(version)
    return NETWORK_OPERATOR_COMMON_KEYS | entry["added"]


# A server version with a semver pre-release part: v1.33.5-gke.1234, v1.34.3-eks-ac2d5a0 (build metadata, +k3s1,
# is no pre-release).
_PRERELEASE_SERVER = re.compile(r"^v?\d+\.\d+\.\d+-[0-9A-Za-z.-]+(?:\+[0-9A-Za-z.-]+)?\Z")
_PRERELEASE_COMPARATOR = re.compile(r"\d+(?:\.\d+){0,2}-[0-9A-Za-z]")


def refuses_prerelease(kube_version):
    """Whether helm refuses a chart of this ``kubeVersion`` on every cluster that reports a pre-release version:
    none of its comparators carries a pre-release itself (the "-0" idiom)."""
    return bool(kube_version) and not _PRERELEASE_COMPARATOR.search(str(kube_version))


def kube_version_refusal(chart, kube_version, server_version=None):
    """Why helm would refuse ``chart`` (its Chart.yaml ``kubeVersion``) on a cluster of ``server_version``, or
    without one on a cluster that reports any pre-release version; None when it would not for that reason.

    helm checks kubeVersion with Masterminds/semver, whose constraints never match a pre-release version unless
    one of their comparators carries a pre-release itself (the "-0" idiom); managed clusters report pre-release
    versions (GKE v1.33.5-gke.1234, EKS v1.34.3-eks-ac2d5a0), so ``>= 1.21.0`` refuses them however new they
    are. Only that rule is judged here: the range itself is helm's to check.
    """
    if not refuses_prerelease(kube_version):
        return None
    if server_version is None:
        return ("%s declares kubeVersion '%s', which helm never matches with a pre-release Kubernetes version such as "
                "GKE's v1.33.5-gke.1234 or EKS's v1.34.3-eks-ac2d5a0" % (chart, kube_version))
    if not server_version or not _PRERELEASE_SERVER.match(str(server_version).strip()):
        return None
    return ("%s declares kubeVersion '%s', which helm never matches with a pre-release Kubernetes version such as "
            "this cluster's %s (helm: 'chart requires kubeVersion: %s which is incompatible with Kubernetes %s')"
            % (chart, kube_version, server_version, kube_version, server_version))


def check_network_operator_values(values, version, option="values"):
    keys = network_operator_keys(version)
    unknown = sorted(set(values or {}) - keys)
    require(not unknown, "%s: Network Operator chart %s has no top-level value %s (it has: %s)", option, version,
            ", ".join(unknown), ", ".join(sorted(keys)))
    return values


def _image(series, release, component):
    """The component's image for the release (the catalog's component_image), refused as an input error."""
    try:
        return component_image(series, release, component)
    except ValueError as exc:
        raise OperatorInputError("chart_version: %s; choose that release or the 25.7 series or later" % exc)


def _selectors(option, selectors):
    selectors = dict(selectors or {})
    allowed = RDMA_SHARED_SELECTORS
    unknown = sorted(set(selectors) - set(allowed))
    require(not unknown, "%s: unknown selector %s (allowed: %s)", option, ", ".join(unknown), ", ".join(allowed))
    for key, value in selectors.items():
        require(isinstance(value, list) and all(isinstance(v, str) and v for v in value),
                "%s.%s must be a list of strings", option, key)
        for name in value if key == "ifNames" else ():
            why = interface_name_problem(name)
            require(why is None, "%s.ifNames: %s", option, why)
    return selectors or {"vendors": [MELLANOX_VENDOR]}


def _ipv4_subnet(option, value):
    """An IPv4 CIDR as nv-ipam's IPPool webhook parses it (Go's net.ParseCIDR: host bits may be set)."""
    text = str(value or "")
    if re.match(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/\d{1,2}\Z", text):
        try:
            return ipaddress.IPv4Network(text, strict=False)
        except ValueError:
            pass
    raise OperatorInputError("%s: %r is not an IPv4 CIDR (a.b.c.d/0-32, each part 0-255)" % (option, value))


def _usable_addresses(subnet):
    """The addresses nv-ipam hands out in ``subnet`` (its GetPossibleIPCount: /32 one, /31 two, else less the network
    and broadcast addresses)."""
    if subnet.prefixlen >= 31:
        return 1 if subnet.prefixlen == 32 else 2
    return subnet.num_addresses - 2


def _gateway(option, value, subnet):
    try:
        address = ipaddress.IPv4Address(str(value))
    except ValueError:
        raise OperatorInputError("%s: %r is not an IPv4 address" % (option, value))
    require(address in subnet, "%s: %s is outside the pool's subnet %s", option, value, subnet)
    return value


def _ipam_config(option, network, ipam, pools):
    if ipam == "nv-ipam":
        pool = network.get("ip_pool")
        require(pool in pools, "%s.ip_pool: %r is not one of network_operator ip_pools (%s)", option, pool,
                ", ".join(sorted(pools)) or "none defined")
        return json.dumps({"type": "nv-ipam", "poolName": pool})
    ip_range = network.get("range")
    require(bool(ip_range), "%s.range: Whereabouts needs the network's address range (CIDR)", option)
    _ipv4_subnet(option + ".range", ip_range)
    config = {"type": "whereabouts", "range": ip_range}
    if network.get("exclude"):
        for position, excluded in enumerate(network["exclude"]):
            _ipv4_subnet("%s.exclude[%d]" % (option, position), excluded)
        config["exclude"] = list(network["exclude"])
    return json.dumps(config)


def network_operator_plan(options, hosts=None):
    """Chart values, the NicClusterPolicy, IP pools and network objects for the Network Operator."""
    options = dict(options or {})
    version = str(options.get("chart_version") or "")
    series, entry = network_operator_chart(version)
    pinned = _pinned(version, entry["pinned"])
    namespace = _dns_label("namespace", options.get("namespace") or "nvidia-network-operator")
    ipam = _choice("ipam", options.get("ipam") or "auto", IPAM_PLUGINS)
    if ipam == "auto":
        ipam = entry["default_ipam"]
    require(ipam in entry["ipam"], "ipam: %s is not available in Network Operator chart %s (Whereabouts was "
            "removed in 25.10; use nv-ipam)", ipam, version)
    spec = {}
    ofed = dict(options.get("ofed") or {})
    source = _choice("ofed.source", ofed.get("source") or "host", OFED_SOURCES)
    if source == "host":
        lacking = _hosts_with(hosts, lambda f: not (f.get("ofed") or {}).get("present"))
        require(not lacking, "ofed.source host: MLNX_OFED/DOCA-OFED is not installed on %s "
                "(install it, or set ofed.source: operator)", ", ".join(lacking))
    else:
        require(bool(ofed.get("version")) or pinned == entry["pinned"], "ofed.version: the catalog's DOCA driver "
                "(%s) is the one of Network Operator %s; set the doca-driver image tag of %s (its hack/release.yaml, "
                "Mofed)", entry["doca_driver"], entry["pinned"], pinned)
        driver_version = ofed.get("version") or entry["doca_driver"]
        _images("ofed", {"image": DOCA_DRIVER_IMAGE, "repository": ofed.get("repository") or MELLANOX_REPOSITORY,
                         "version": str(driver_version)})
        spec["ofedDriver"] = {"image": DOCA_DRIVER_IMAGE, "repository": ofed.get("repository") or MELLANOX_REPOSITORY,
                              "version": str(driver_version),
                              "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                                                "drain": {"enable": True, "force": True, "timeoutSeconds": 300,
                                                          "deleteEmptyDir": True}},
                              "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
                              "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
                              "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30}}
    plugin = dict(options.get("rdma_shared_device_plugin") or {})
    resources = []
    if plugin.get("enabled", True):
        resource_name = plugin.get("resource_name") or RDMA_SHARED_RESOURCE
        require(re.match(r"^[a-z0-9_]+\Z", resource_name) is not None,
                "rdma_shared_device_plugin.resource_name: %r must be lowercase letters, digits and '_'", resource_name)
        hca_max = plugin.get("rdma_hca_max", 63)
        require(isinstance(hca_max, int) and not isinstance(hca_max, bool) and 1 <= hca_max <= 1000,
                "rdma_shared_device_plugin.rdma_hca_max must be between 1 and 1000, got %r", hca_max)
        config = {"configList": [{"resourceName": resource_name, "rdmaHcaMax": hca_max,
                                  "selectors": _selectors("rdma_shared_device_plugin.selectors", plugin.get("selectors"))}]}
        spec["rdmaSharedDevicePlugin"] = dict(_image(series, pinned, "rdmaSharedDevicePlugin"),
                                              config=json.dumps(config, sort_keys=True))
        resources.append("%s/%s" % (RDMA_RESOURCE_PREFIX, resource_name))
    secondary = {"multus": _image(series, pinned, "multus"), "cniPlugins": _image(series, pinned, "cniPlugins")}
    networks = list(options.get("networks") or [])
    if any((n or {}).get("kind") == "ipoib" for n in networks) or options.get("ipoib"):
        secondary["ipoib"] = _image(series, pinned, "ipoib")
    if ipam == "whereabouts":
        secondary["ipamPlugin"] = _image(series, pinned, "ipamPlugin")
    else:
        spec["nvIpam"] = dict(_image(series, pinned, "nvIpam"), enableWebhook=False)
    spec["secondaryNetwork"] = secondary
    policy = {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
              "metadata": {"name": NIC_CLUSTER_POLICY_NAME}, "spec": spec}

    pools, pool_objects = {}, []
    for index, pool in enumerate(options.get("ip_pools") or []):
        option = "ip_pools[%d]" % index
        require(ipam == "nv-ipam", "%s: IP pools are nv-ipam objects, and ipam is %s", option, ipam)
        name = _dns_subdomain(option + ".name", pool.get("name"))
        require(name not in pools, "%s.name: %s is defined twice", option, name)
        subnet = _ipv4_subnet(option + ".subnet", pool.get("subnet"))
        block = pool.get("per_node_block_size", 16)
        usable = _usable_addresses(subnet)
        require(usable >= 2, "%s.subnet: %s has %d usable address, and a node's block needs at least 2",
                option, pool.get("subnet"), usable)
        require(isinstance(block, int) and not isinstance(block, bool) and 2 <= block <= usable,
                "%s.per_node_block_size must be between 2 and %d (the usable addresses of %s), got %r",
                option, usable, pool.get("subnet"), block)
        pool_spec = {"subnet": pool["subnet"], "perNodeBlockSize": block}
        if pool.get("gateway"):
            pool_spec["gateway"] = _gateway(option + ".gateway", pool["gateway"], subnet)
        pools[name] = pool_spec
        pool_objects.append({"apiVersion": NV_IPAM_API, "kind": "IPPool",
                             "metadata": {"name": name, "namespace": namespace}, "spec": pool_spec})

    network_objects, names = [], set()
    for index, network in enumerate(networks):
        option = "networks[%d]" % index
        network = dict(network or {})
        kind = NETWORK_KINDS[_choice(option + ".kind", network.get("kind"), tuple(NETWORK_KINDS))]
        name = _dns_subdomain(option + ".name", network.get("name"))
        require(name not in names, "%s.name: %s is defined twice", option, name)
        names.add(name)
        net_spec = {"networkNamespace": _dns_label(option + ".network_namespace", network.get("network_namespace") or "default")}
        if kind in ("MacvlanNetwork", "IPoIBNetwork"):
            require(bool(network.get("master")), "%s.master: the %s needs its host interface (ibdev2netdev shows it)",
                    option, kind)
            why = interface_name_problem(network["master"])
            require(why is None, "%s.master: %s", option, why)
            net_spec["master"] = network["master"]
        if kind == "MacvlanNetwork":
            net_spec["mode"] = _choice(option + ".mode", network.get("mode") or "bridge", MACVLAN_MODES)
            mtu = network.get("mtu", 1500)
            require(isinstance(mtu, int) and not isinstance(mtu, bool) and 0 <= mtu <= 9216,
                    "%s.mtu must be between 0 and 9216, got %r", option, mtu)
            net_spec["mtu"] = mtu
        if kind == "HostDeviceNetwork":
            require(bool(network.get("resource_name")), "%s.resource_name: a HostDeviceNetwork names the SR-IOV "
                    "device plugin resource its pods request", option)
            net_spec["resourceName"] = network["resource_name"]
        net_spec["ipam"] = _ipam_config(option, network, ipam, pools)
        network_objects.append({"apiVersion": "mellanox.com/v1alpha1", "kind": kind, "metadata": {"name": name},
                                "spec": net_spec})
    values = {"nfd": {"enabled": bool(options.get("nfd_enabled", True)), "deployNodeFeatureRules": True},
              "sriovNetworkOperator": {"enabled": bool(options.get("sriov_network_operator", False))}}
    check_network_operator_values(options.get("values") or {}, version)
    _images("values", options.get("values") or {})
    values = _merge(values, options.get("values") or {})
    return {
        "chart": dict(_chart_source(options, NETWORK_OPERATOR_CHART, NETWORK_OPERATOR_REPO_URL),
                      release_name=options.get("release_name") or "network-operator", release_namespace=namespace,
                      chart_version=pinned, values=values),
        "series": series,
        "kube_version": entry["kube_version"],
        "namespace": namespace,
        "ipam": ipam,
        "ofed_source": source,
        "nic_cluster_policy": policy,
        "ip_pools": pool_objects,
        "networks": network_objects,
        "rdma_resources": resources,
        "expected_states": sorted(NCP_STATES[k] for k in list(spec) + list(secondary) if k in NCP_STATES),
    }
