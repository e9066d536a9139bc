# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gke_server_config_info, gke_multinetwork_info and the gke_cluster version alias, by ansible-playbook against the
GCP double: the info modules read only (in check mode too), and the alias resolves through the server config."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT

LOCATION = "us-central1"


def play(defaults, tasks, check=False):
    return [dict(name="info", hosts="localhost", gather_facts=False, module_defaults=defaults, check_mode=check,
                 tasks=tasks)]


def test_info_modules_read_only_and_alias_resolves(run_playbook, gcp_double, gcp_defaults):
    offered = gcp_double.gke_versions
    fabric = dict(cluster="infofab", location=LOCATION, gpudirect="tcpx")
    tasks = [
        {"name": "fabric before", "register": "before", "gpu_ops.cluster.gke_multinetwork_info": fabric},
        {"name": "versions", "register": "config", "gpu_ops.cluster.gke_server_config_info": dict(
            location=LOCATION, gpudirect="tcpxo")},
        {"name": "create fabric", "gpu_ops.cluster.gke_multinetwork": fabric},
        {"name": "cluster on a minor", "register": "cluster", "gpu_ops.cluster.gke_cluster": dict(
            name="infofab", location=LOCATION, cluster_version="1.30", multi_networking=True)},
        {"name": "fabric after", "register": "after", "gpu_ops.cluster.gke_multinetwork_info": fabric},
        {"name": "GPUDirect pool", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="gke", cluster="infofab", location=LOCATION, name="a3high", gpudirect="tcpx",
            machine_type="a3-highgpu-8g", additional_node_networks="{{ after.additional_node_networks }}", gvnic=True,
            node_count=1, gpu_driver_version="latest")},
        {"name": "L4 pool", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="gke", cluster="infofab", location=LOCATION, name="l4", machine_type="g2-standard-8",
            accelerator_type="nvidia-l4", accelerator_count=1, node_count=1)},
        {"name": "pools", "register": "pools", "gpu_ops.cluster.gpu_nodepool_info": dict(
            provider="gke", cluster="infofab", location=LOCATION)},
        {"name": "one pool", "register": "one", "gpu_ops.cluster.gpu_nodepool_info": dict(
            provider="gke", cluster="infofab", location=LOCATION, name="a3high")},
        {"name": "no cluster", "register": "nocluster", "gpu_ops.cluster.gpu_nodepool_info": dict(
            provider="gke", cluster="nosuch", location=LOCATION)},
        {"name": "no version fits", "register": "nofit", "ignore_errors": True, "gpu_ops.cluster.gke_cluster": dict(
            name="other", location=LOCATION, cluster_version="1.33", multi_networking=False)},
        {"name": "check", "ansible.builtin.assert": {"that": [
            "not before.exists and before.missing | length == 12 and not before.cluster.exists",
            "before.k8s_network_names == ['vpc1', 'vpc2', 'vpc3', 'vpc4']",
            "config.valid_master_versions == %r" % offered,
            "config.gpudirect.latest == '%s'" % offered[0],
            "config is not changed and before is not changed and after is not changed",
            "cluster.resolved_version == {'alias': '1.30', 'version': '1.30.4-gke.1129000'}",
            "after.exists and after.missing == []",
            "after.nics[1].network.name == 'infofab-gpunic-2' and after.nics[1].subnetwork.ipCidrRange is defined",
            "after.cluster.exists and after.cluster.multi_networking",
            "pools.cluster_exists and pools is not changed",
            "pools.node_pools | map(attribute='name') | sort == ['a3high', 'default-pool', 'l4']",
            "one.node_pools | length == 1",
            "one.node_pools[0].gpudirect == {'profile': 'tcpx', 'gpu_nics_needed': 4, 'gpu_nics': 4, 'ready': true}",
            "one.node_pools[0].expected_resources == {'nvidia.com/gpu': 8}",
            "one.node_pools[0].additional_node_networks == after.additional_node_networks",
            "(pools.node_pools | selectattr('name', 'eq', 'l4') | first).gpudirect is none",
            "(pools.node_pools | selectattr('name', 'eq', 'l4') | first).expected_resources == {'nvidia.com/gpu': 1}",
            "not nocluster.cluster_exists and nocluster.node_pools == []",
            "nofit is failed and \"no GKE version offered in this location matches '1.33'\" in nofit.msg",
            "'offered: ' ~ (%r | join(', ')) in nofit.msg" % offered,
        ]}},
    ]
    run_playbook(play(gcp_defaults, tasks)).assert_ok()
    cluster = gcp_double.resource("v1/projects/%s/locations/%s/clusters/infofab" % (GCP_PROJECT, LOCATION))
    assert cluster["initialClusterVersion"] == "1.30.4-gke.1129000"
    assert gcp_double.resource("v1/projects/%s/locations/%s/clusters/other" % (GCP_PROJECT, LOCATION)) is None

    # in check mode the info modules still read, and nothing anywhere writes
    gcp_double.clear_log()
    check = [dict(tasks[0], register="checked"), tasks[1],
             {"name": "check", "ansible.builtin.assert": {"that": ["checked.exists", "config.gpudirect.versions | length > 0"]}}]
    run_playbook(play(gcp_defaults, check, check=True)).assert_ok()
    assert gcp_double.mutating_requests() == [] and gcp_double.read_counts()


def test_fabric_info_finds_custom_names_from_the_same_options(run_playbook, gcp_double, gcp_defaults):
    # one set of variables for both modules: the info module takes every naming option the resource module takes
    fabric = dict(cluster="custom", location=LOCATION, nic_count=2, name_prefix="fab", k8s_network_prefix="gpu",
                  networks=[dict(name="nic-a", subnetwork="nic-a-sub", cidr="10.8.0.0/24"),
                            dict(firewall="nic-b-fw", k8s_network="second", mtu=1500)])
    tasks = [
        {"name": "create fabric", "gpu_ops.cluster.gke_multinetwork": fabric},
        {"name": "read it back", "register": "info", "gpu_ops.cluster.gke_multinetwork_info": fabric},
        {"name": "check", "ansible.builtin.assert": {"that": [
            "info.exists and info.missing == [] and info is not changed",
            "info.nics | map(attribute='network.name') | list == ['nic-a', 'fab-2']",
            "info.nics | map(attribute='subnetwork.name') | list == ['nic-a-sub', 'fab-2-sub']",
            "info.nics | map(attribute='firewall.name') | list == ['fab-1-internal', 'nic-b-fw']",
            "info.nics[0].subnetwork.ipCidrRange == '10.8.0.0/24' and info.nics[1].network.mtu == 1500",
            "info.k8s_network_names == ['gpu1', 'second']",
        ]}},
    ]
    run_playbook(play(gcp_defaults, tasks)).assert_ok()
    writes = gcp_double.mutating_requests()
    gcp_double.clear_log()
    run_playbook(play(gcp_defaults, tasks[1:])).assert_ok()
    assert len(writes) == 6 and gcp_double.mutating_requests() == []


def test_info_modules_refuse_bad_input_naming_the_option(run_playbook, gcp_double, gcp_defaults):
    tasks = [{"name": "no size", "register": "nosize", "ignore_errors": True,
              "gpu_ops.cluster.gke_multinetwork_info": dict(cluster="x", location=LOCATION)},
             {"name": "render", "register": "render", "ignore_errors": True,
              "gpu_ops.cluster.gke_server_config_info": dict(location=LOCATION, render_dir="/tmp/none")},
             # the alias is resolved only after every option is valid: no server-config read for a refused task
             {"name": "alias, bad datapath", "register": "aliasbad", "ignore_errors": True,
              "gpu_ops.cluster.gke_cluster": dict(name="refused", location=LOCATION, cluster_version="latest",
                                                  multi_networking=True, datapath="legacy")},
             {"name": "check", "ansible.builtin.assert": {"that": [
                 "nosize is failed and 'gpudirect' in nosize.msg and 'nic_count' in nosize.msg",
                 "render is failed and 'render mode' in render.msg",
                 "aliasbad is failed and 'datapath' in aliasbad.msg and 'cluster_version' not in aliasbad.msg"]}}]
    gcp_double.clear_log()
    run_playbook(play(gcp_defaults, tasks)).assert_ok()
    assert gcp_double.requests == [], gcp_double.requests


def test_gpu_nodepool_info_aks_mig_facts(run_playbook, arm_double, arm_env, azure_defaults):
    pool = dict(provider="aks", resource_group="gpu-rg", cluster="gpu-aks", name="mig", vm_size="Standard_ND96asr_v4",
                node_count=1, gpu_instance_profile="MIG2g", os_sku="Ubuntu")
    info = dict(provider="aks", resource_group="gpu-rg", cluster="gpu-aks")
    tasks = [{"name": "MIG pool", "gpu_ops.cluster.gpu_nodepool": pool},
             {"name": "pools", "register": "pools", "gpu_ops.cluster.gpu_nodepool_info": dict(info, mig_strategy="mixed")},
             {"name": "one", "register": "one", "gpu_ops.cluster.gpu_nodepool_info": dict(info, name="mig")},
             {"name": "check", "ansible.builtin.assert": {"that": [
                 "pools.node_pools | map(attribute='name') | sort == ['mig', 'nodepool1']",
                 "one.node_pools[0].gpu_instance_profile == 'MIG2g'",
                 "one.node_pools[0].mig.mig_profile == '2g.10gb' and one.node_pools[0].mig.instances_per_vm == 24",
                 "one.node_pools[0].expected_resources == {'nvidia.com/gpu': 24}",
                 "(pools.node_pools | selectattr('name', 'eq', 'mig') | first).expected_resources"
                 " == {'nvidia.com/mig-2g.10gb': 24}",
                 "(pools.node_pools | selectattr('name', 'eq', 'nodepool1') | first).mig is none"]}}]
    run_playbook([dict(name="aks", hosts="localhost", gather_facts=False, module_defaults=azure_defaults,
                       tasks=tasks)], env=arm_env).assert_ok()
