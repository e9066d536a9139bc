# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Roles are as strict as modules: one table of bad role inputs, one ansible-playbook run.

Every case includes a role in render mode with one bad input inside a block whose rescue records
the failure message; the last task prints them all. Each case must fail, name the variable (with
its path for suboptions) and leave its render folder unwritten. A hostile new user's inputs: typos
in nested keys, wrong types, names Kubernetes refuses, path traversal, unicode, Secrets in Lists.
"""

from __future__ import annotations

import json

import pytest

SECRET_MARK = "hunter2-never-printed"
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"pw": SECRET_MARK}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"a": "b"}}
CHART = {"release_name": "plugin", "release_namespace": "nvidia", "chart_ref": "nvdp/nvidia-device-plugin",
         "chart_version": "0.17.0"}


def apply_manifests(manifests, **extra):
    return ("apply", "manifests", dict(apply_manifests=manifests, **extra))


def apply_chart(**changes):
    return ("apply", "chart", dict(apply_chart=dict(CHART, **changes)))


def names(*checks):
    return ("apply", "names", dict(apply_names_for="my_role", apply_names=[
        dict(option=o, rule=r, value=v) for o, r, v in checks]))


FABRIC = {"additional_node_networks": [{"network": "vpc%d" % i, "subnetwork": "sub%d" % i} for i in range(1, 9)],
          "manifests": []}
CLUSTER = dict(gke_gpu_cluster_project="p", gke_gpu_cluster_location="us-central1", gke_gpu_cluster_name="c",
               gke_gpu_cluster_version="1.32.2-gke.1489001", gke_gpu_cluster_fabric=FABRIC)


def role(name, entry="main", **role_vars):
    return (name, entry, role_vars)


def cluster(**changes):
    return role("gke_gpu_cluster", **dict(CLUSTER, **changes))


def awx(**role_vars):
    """awx_job_templates with a valid project URL unless given."""
    return role("awx_job_templates", **dict({"awx_job_templates_project_scm_url": "https://git.example/gpu_ops/cluster.git"},
                                            **role_vars))


def rdma(**role_vars):
    """rdma_test with two nodes, a network and a device given, so that only the value under test is wrong."""
    return role("rdma_test", **dict({"rdma_test_nodes": ["gpu-0", "gpu-1"], "rdma_test_network": "rdma-net",
                                     "rdma_test_device": "mlx5_0", "rdma_test_threshold_gbps": 100.0}, **role_vars))


def driver_pool(**settings):
    """gpu_operator with one NVIDIADriver pool holding ``settings``."""
    return role("gpu_operator", gpu_operator_driver_pools=[dict({"name": "h100", "node_selector": {"pool": "h100"}},
                                                                **settings)])


# (title, (role, entry point, vars), words every one of which the message must hold)
CASES = [
    # --- apply: Secrets at any depth, never printed
    ("apply: Secret in a List", apply_manifests([{"apiVersion": "v1", "kind": "List", "items": [CM, SECRET]}]),
     ["apply_manifests[0].items[1]: a Secret cannot go through"]),
    ("apply: Secret in a SecretList", apply_manifests([{"apiVersion": "v1", "kind": "SecretList", "items": [SECRET]}]),
     ["apply_manifests[0].items[0]: a Secret"]),
    ("apply: Secret in a PodList in a List", apply_manifests(
        [{"kind": "List", "items": [{"kind": "PodList", "items": [SECRET]}]}]), ["apply_manifests[0].items[0].items[0]"]),
    # --- apply: paths stay inside the render folder
    ("apply: step climbing out", apply_manifests([CM], apply_step="../../etc"),
     ["apply_step: '../../etc' holds a path separator"]),
    ("apply: absolute step", apply_manifests([CM], apply_step="/tmp/x"), ["apply_step: '/tmp/x' holds a path"]),
    ("apply: step '..'", apply_manifests([CM], apply_step=".."), ["apply_step: '..' would leave its folder"]),
    ("apply: unicode step", apply_manifests([CM], apply_step="\u00e9tape"), ["apply_step: '\\xe9tape' is not a plain"]),
    ("apply: object name with a path", apply_manifests([dict(CM, metadata={"name": "../../x"})]),
     ["apply_manifests[0].metadata.name: '../../x' is not a DNS-1123 subdomain"]),
    ("apply: object without a name", apply_manifests([dict(CM, metadata={})]),
     ["apply_manifests[0].metadata.name: is required"]),
    ("apply: namespace in capitals", apply_manifests([dict(CM, metadata={"name": "cm", "namespace": "GPU"})]),
     ["apply_manifests[0].metadata.namespace: 'GPU' is not a DNS-1123 label"]),
    ("apply: label value with a space", apply_manifests([dict(CM, metadata={"name": "cm", "labels": {"a": "b c"}})]),
     ["apply_manifests[0].metadata.labels: a: 'b c'"]),
    ("apply: object that is text", apply_manifests(["kind: ConfigMap"]), ["apply_manifests", "dict"]),
    ("apply: typo in wait_condition", apply_manifests([CM], apply_wait_condition={"type": "Ready", "stauts": "True"}),
     ["stauts", "apply_wait_condition"]),
    ("apply: wait_condition status not a choice", apply_manifests([CM], apply_wait_condition={"status": "yes"}),
     ["apply_wait_condition", "status", "True, False, Unknown"]),
    # --- apply: chart
    ("apply: release name too long", apply_chart(release_name="r" * 54),
     ["apply_chart.release_name: ", "a Helm release name has at most 53"]),
    ("apply: release name with a path", apply_chart(release_name="../plugin"), ["apply_chart.release_name: '../plugin'"]),
    ("apply: release namespace with a dot", apply_chart(release_namespace="a.b"),
     ["apply_chart.release_namespace: 'a.b' is not a DNS-1123 label"]),
    ("apply: typo in the chart", apply_chart(chart_verison="1"), ["chart_verison", "apply_chart"]),
    ("apply: chart step with a separator", ("apply", "chart", dict(apply_chart=CHART, apply_step="a/b")),
     ["apply_step: 'a/b' holds a path separator"]),
    # --- apply: names entry point (what other roles call)
    ("names: every problem at once", names(("my_role_namespace", "namespace", "Bad_NS"),
                                           ("my_role_image", "image", "UPPER/x:1"),
                                           ("my_role_labels", "labels", {"bad key": "v"})),
     ["my_role: my_role_namespace: 'Bad_NS'", "my_role_image: ", "my_role_labels: 'bad key'"]),
    ("names: omitted required value", names(("my_role_namespace", "namespace", None)),
     ["my_role_namespace: is required"]),
    # --- gke_gpu_cluster: typos and wrong types inside nested dicts, omitted required variables
    ("gke_gpu_cluster: typo nodecount in node_pool", cluster(gke_gpu_cluster_node_pool={"nodecount": 3}),
     ["nodecount", "gke_gpu_cluster_node_pool"]),
    ("gke_gpu_cluster: typo in placement_policy", cluster(gke_gpu_cluster_node_pool={"placement_policy": {"typ": "COMPACT"}}),
     ["typ", "gke_gpu_cluster_node_pool.placement_policy"]),
    ("gke_gpu_cluster: reservation consume not a choice",
     cluster(gke_gpu_cluster_node_pool={"reservation_affinity": {"consume": "all"}}),
     ["consume", "none, any, specific"]),
    ("gke_gpu_cluster: node_count as text", cluster(gke_gpu_cluster_node_pool={"node_count": "two"}),
     ["node_count", "int"]),
    ("gke_gpu_cluster: driver version not a choice", cluster(gke_gpu_cluster_node_pool={"gpu_driver_version": "550"}),
     ["gpu_driver_version", "default, latest, disabled"]),
    ("gke_gpu_cluster: bad node label", cluster(gke_gpu_cluster_node_pool={"node_labels": {"team": "ml ops"}}),
     ["gke_gpu_cluster_node_pool.node_labels: team: 'ml ops'"]),
    ("gke_gpu_cluster: typo in maintenance_exclusion",
     cluster(gke_gpu_cluster_maintenance_exclusion={"start": "2026-01-01T00:00:00Z"}), ["start", "maintenance_exclusion"]),
    ("gke_gpu_cluster: typo in ip_allocation", cluster(gke_gpu_cluster_ip_allocation={"pods_cidr": "10.0.0.0/14"}),
     ["pods_cidr", "gke_gpu_cluster_ip_allocation"]),
    ("gke_gpu_cluster: authorized network without cidr_block",
     cluster(gke_gpu_cluster_master_authorized_networks=[{"cidr": "10.0.0.0/8"}]), ["cidr", "master_authorized_networks"]),
    ("gke_gpu_cluster: typo in default_node_pool", cluster(gke_gpu_cluster_default_node_pool={"machinetype": "e2"}),
     ["machinetype", "gke_gpu_cluster_default_node_pool"]),
    ("gke_gpu_cluster: network step with a path", cluster(gke_gpu_cluster_network_step="../networks"),
     ["gke_gpu_cluster_network_step: '../networks'"]),
    ("gke_gpu_cluster: omitted name", role("gke_gpu_cluster", **{k: v for k, v in CLUSTER.items()
                                                                 if k != "gke_gpu_cluster_name"}),
     ["missing required arguments: gke_gpu_cluster_name"]),
    ("gke_gpu_cluster: teardown with a typo in node_pool",
     role("gke_gpu_cluster", "teardown", gke_gpu_cluster_project="p", gke_gpu_cluster_location="us-central1",
          gke_gpu_cluster_name="c", gke_gpu_cluster_node_pool={"nmae": "gpu"}), ["nmae"]),
    # --- gcp_gpu_vpcs
    ("gcp_gpu_vpcs: typo in networks", role("gcp_gpu_vpcs", gcp_gpu_vpcs_cluster="c", gcp_gpu_vpcs_location="us-central1",
                                            gcp_gpu_vpcs_networks=[{"cdir": "10.0.0.0/24"}]),
     ["cdir", "gcp_gpu_vpcs_networks"]),
    ("gcp_gpu_vpcs: step climbing out", role("gcp_gpu_vpcs", gcp_gpu_vpcs_cluster="c", gcp_gpu_vpcs_location="us-central1",
                                             gcp_gpu_vpcs_step="../../x"), ["gcp_gpu_vpcs_step: '../../x'"]),
    ("gcp_gpu_vpcs: omitted cluster", role("gcp_gpu_vpcs", gcp_gpu_vpcs_location="us-central1"),
     ["missing required arguments: gcp_gpu_vpcs_cluster"]),
    ("gcp_gpu_vpcs: omitted location", role("gcp_gpu_vpcs", gcp_gpu_vpcs_cluster="c"),
     ["missing required arguments: gcp_gpu_vpcs_location"]),
    ("gcp_gpu_vpcs: concurrency zero", role("gcp_gpu_vpcs", gcp_gpu_vpcs_project="p", gcp_gpu_vpcs_cluster="c",
                                            gcp_gpu_vpcs_location="us-central1", gcp_gpu_vpcs_concurrency=0),
     ["concurrency: must be between 1"]),
    # --- mps / awx_job_templates: structured options carry suboptions
    ("mps: pinned memory limit not a size", role("mps", mps_pinned_device_mem_limit={"0": "lots"}),
     ["pinned_device_mem_limit"]),
    ("awx_job_templates: typo in a template", role("awx_job_templates", awx_job_templates_project_scm_url="https://x/y.git",
                                                   awx_job_templates_templates=[{"name": "t", "playbok": "p.yml",
                                                                                 "inventory": "i"}]),
     ["playbok", "awx_job_templates_templates"]),
    ("awx_job_templates: typo in a survey entry", role(
        "awx_job_templates", awx_job_templates_project_scm_url="https://x/y.git",
        awx_job_templates_templates=[{"name": "t", "playbook": "p.yml", "inventory": "i",
                                      "survey": [{"role": "mps", "option": ["mps_stop_policy"]}]}]),
     ["option", "survey"]),
    ("awx_job_templates: inventory without a name", role(
        "awx_job_templates", awx_job_templates_project_scm_url="https://x/y.git",
        awx_job_templates_inventories=[{"source_path": "inventories/fleet"}]), ["name", "awx_job_templates_inventories"]),
    ("awx_job_templates: default setting typo", role(
        "awx_job_templates", awx_job_templates_project_scm_url="https://x/y.git",
        awx_job_templates_defaults={"diff": True}), ["diff", "awx_job_templates_defaults"]),
    # --- gpudirect_installer / nri_device_injector
    ("gpudirect_installer: namespace with capitals", role("gpudirect_installer", gpudirect_installer_namespace="Kube-System"),
     ["gpudirect_installer_namespace: 'Kube-System' is not a DNS-1123 label"]),
    ("gpudirect_installer: image with a shell", role("gpudirect_installer", gpudirect_installer_image="x:1;reboot"),
     ["gpudirect_installer_image: 'x:1;reboot' is not an image reference"]),
    ("gpudirect_installer: registry with a scheme", role("gpudirect_installer",
                                                         gpudirect_installer_registry="https://mirror.example"),
     ["gpudirect_installer_registry: ", "is not a registry"]),
    ("gpudirect_installer: label key with a space", role("gpudirect_installer", gpudirect_installer_labels={"a b": "c"}),
     ["gpudirect_installer_labels: 'a b' is not a label key"]),
    ("gpudirect_installer: absolute step", role("gpudirect_installer", gpudirect_installer_step="/etc"),
     ["gpudirect_installer_step: '/etc' holds a path separator"]),
    ("gpudirect_installer: gpudirect typo", role("gpudirect_installer", gpudirect_installer_gpudirect="tcpxx"),
     ["gpudirect_installer_gpudirect", "tcpx, tcpxo"]),
    ("nri_device_injector: image in capitals", role("nri_device_injector", nri_device_injector_image="Registry/NRI:1"),
     ["nri_device_injector_image: "]),
    ("nri_device_injector: long namespace", role("nri_device_injector", nri_device_injector_namespace="n" * 64),
     ["nri_device_injector_namespace: ", "at most 63"]),
    # --- nccl_test
    ("nccl_test: namespace with unicode", role("nccl_test", nccl_test_namespace="d\u00e9faut"),
     ["nccl_test_namespace: "]),
    ("nccl_test: prefix too long for the pod names", role("nccl_test", nccl_test_name_prefix="p" * 60),
     ["nccl_test_name_prefix: ", "at most 63"]),
    ("nccl_test: threshold typo", role("nccl_test", nccl_test_benchmark_thresholds={"all_redcue": 40}),
     ["all_redcue", "nccl_test_benchmark_thresholds"]),
    ("nccl_test: threshold as text", role("nccl_test", nccl_test_benchmark_thresholds={"all_reduce": "fast"}),
     ["all_reduce", "float"]),
    # --- nvidia_device_plugin
    ("nvidia_device_plugin: release name too long",
     role("nvidia_device_plugin", nvidia_device_plugin_release_name="nvidia-device-plugin-" + "x" * 40),
     ["nvidia_device_plugin_release_name: ", "a Helm release name has at most 53"]),
    ("nvidia_device_plugin: empty namespace", role("nvidia_device_plugin", nvidia_device_plugin_namespace=""),
     ["nvidia_device_plugin_namespace: must not be empty"]),
    ("nvidia_device_plugin: toleration typo", role("nvidia_device_plugin",
                                                   nvidia_device_plugin_tolerations=[{"key": "a", "efect": "NoSchedule"}]),
     ["efect", "nvidia_device_plugin_tolerations"]),
    ("nvidia_device_plugin: toleration effect not a choice",
     role("nvidia_device_plugin", nvidia_device_plugin_tolerations=[{"key": "a", "effect": "NoSchedul"}]),
     ["effect", "NoSchedule, PreferNoSchedule, NoExecute"]),
    ("nvidia_device_plugin: selector value with a slash",
     role("nvidia_device_plugin", nvidia_device_plugin_node_selector={"pool": "gpu/a100"}),
     ["nvidia_device_plugin_node_selector: pool: 'gpu/a100'"]),
    ("nvidia_device_plugin: sharing config name with a space",
     role("nvidia_device_plugin", nvidia_device_plugin_sharing_config_name="my config"),
     ["nvidia_device_plugin_sharing_config_name: 'my config'"]),
    ("names: unknown rule", ("apply", "names", dict(apply_names=[dict(option="x", rule="hostname", value="x")])),
     ["rule", "hostname"]),
    # --- gpu_operator / network_operator: the operators' structured settings carry suboptions
    ("gpu_operator: typo in a driver pool's rdma", driver_pool(rdma={"enabled": True, "useHostMOFED": True}),
     ["useHostMOFED", "gpu_operator_driver_pools", "rdma"]),
    ("gpu_operator: GDRCopy pull policy not a choice", driver_pool(gdrcopy={"enabled": True, "imagePullPolicy": "always"}),
     ["imagePullPolicy", "Always, IfNotPresent, Never"]),
    ("gpu_operator: GDS env entry without a name", driver_pool(gds={"enabled": True, "env": [{"value": "1"}]}),
     ["name", "gpu_operator_driver_pools", "env"]),
    ("gpu_operator: driver pool selector value with a space", driver_pool(node_selector={"pool": "h100 sxm"}),
     ["driver_pools[0].node_selector: pool: 'h100 sxm'"]),
    ("gpu_operator: typo in the MIG settings", role("gpu_operator", gpu_operator_mig={"stratgy": "mixed"}),
     ["stratgy", "gpu_operator_mig"]),
    ("network_operator: SR-IOV selector for the RDMA shared plugin", role(
        "network_operator", network_operator_rdma_shared_device_plugin={"selectors": {"rootDevices": ["0000:18:00.0"]}}),
     ["rootDevices", "selectors"]),
    ("network_operator: selector vendors as a number", role(
        "network_operator", network_operator_rdma_shared_device_plugin={"selectors": {"vendors": [{"id": "15b3"}]}}),
     ["vendors"]),
    # --- network_operator: nv-ipam's IPPool rules and Linux interface names
    ("network_operator: gateway outside its pool's subnet", role(
        "network_operator", network_operator_ip_pools=[{"name": "p", "subnet": "10.0.0.0/24", "gateway": "10.0.1.1"}]),
     ["ip_pools[0].gateway: 10.0.1.1 is outside the pool's subnet 10.0.0.0/24"]),
    ("network_operator: per-node block larger than the subnet", role(
        "network_operator", network_operator_ip_pools=[{"name": "p", "subnet": "10.0.0.0/29", "per_node_block_size": 8}]),
     ["ip_pools[0].per_node_block_size must be between 2 and 6"]),
    ("network_operator: macvlan master with a shell metacharacter", role(
        "network_operator", network_operator_ip_pools=[{"name": "p", "subnet": "10.0.0.0/24"}],
        network_operator_networks=[{"kind": "macvlan", "name": "n", "master": "ens1;reboot", "ip_pool": "p"}]),
     ["networks[0].master: 'ens1;reboot' is not 1 to 15 letters"]),
    # --- image references in raw chart values: every chart goes through apply's chart entry point
    ("nvidia_device_plugin: raw chart values with a bad image tag", role(
        "nvidia_device_plugin",
        nvidia_device_plugin_values={"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.17.0 --privileged"}}),
     ["apply_chart.values: image.tag: 'v0.17.0 --privileged' is not an image tag"]),
    ("apply: chart values with a repository in capitals", apply_chart(values={"driver": {"repository": "nvcr.io/Nvidia"}}),
     ["apply_chart.values: driver.repository: 'nvcr.io/Nvidia' is not an image reference"]),
    ("gpu_operator: raw values with an image holding a space", role(
        "gpu_operator", gpu_operator_values={"devicePlugin": {"image": "k8s-device-plugin v2"}}),
     ["values.devicePlugin.image: 'k8s-device-plugin v2' is not an image reference"]),
    # --- retries, timeouts and delays are 0 or more (apply's names check, rule count)
    ("gpu_operator: negative wait retries", role("gpu_operator", gpu_operator_wait_retries=-1),
     ["gpu_operator_wait_retries: -1 is negative"]),
    ("network_operator: negative wait delay", role("network_operator", network_operator_wait_delay=-5),
     ["network_operator_wait_delay: -5 is negative"]),
    ("nvidia_device_plugin: negative verify retries", role("nvidia_device_plugin", nvidia_device_plugin_verify_retries=-3),
     ["nvidia_device_plugin_verify_retries: -3 is negative"]),
    ("nccl_test: negative pod timeout", role("nccl_test", nccl_test_pod_timeout=-1), ["nccl_test_pod_timeout: -1 is negative"]),
    ("apply: negative wait timeout", apply_manifests([CM], apply_wait_timeout=-10), ["apply_wait_timeout: -10 is negative"]),
    ("tcpxo_installer: negative wait delay", role("tcpxo_installer", tcpxo_installer_wait_delay=-1),
     ["_wait_delay: -1 is negative"]),
    # --- awx_job_templates: what the AWX API would refuse (plugins/plugin_utils/_awx/inputs.py), secrets never shown
    ("awx_job_templates: project URL with an unknown scheme", awx(awx_job_templates_project_scm_url="s3://bucket/cluster.git"),
     ["awx_job_templates_project_scm_url: 's3://bucket/cluster.git': scheme 's3' is not one AWX clones git from"]),
    ("awx_job_templates: GitHub over SSH as another user", awx(awx_job_templates_project_scm_url="ssh://me@github.com/o/r.git"),
     ["SSH access to github.com needs the user git"]),
    ("awx_job_templates: project name with a newline", awx(awx_job_templates_project_name="gpu\nops"),
     ["awx_job_templates_project_name: 'gpu\\nops' holds a control character"]),
    ("awx_job_templates: credential named twice", awx(awx_job_templates_credentials=[
        {"name": "GCP", "type": "gcp"}, {"name": "GCP", "type": "azure"}]),
     ["awx_job_templates_credentials[1].name: GCP is named twice"]),
    ("awx_job_templates: service account key not a PEM key", awx(awx_job_templates_credentials=[
        {"name": "GCP", "type": "gcp", "inputs": {"username": "sa@p.iam.gserviceaccount.com", "ssh_key_data": SECRET_MARK}}]),
     ["awx_job_templates_credentials[0]: inputs.ssh_key_data: is not a PEM private key"]),
    ("awx_job_templates: Azure subscription not a GUID", awx(awx_job_templates_credentials=[
        {"name": "Azure", "type": "azure", "inputs": {"subscription": "my-subscription", "secret": SECRET_MARK}}]),
     ["awx_job_templates_credentials[0]: inputs.subscription: is not a subscription ID (a GUID)"]),
    ("awx_job_templates: a cluster playbook sliced", awx(awx_job_templates_templates=[
        {"name": "Fabric", "playbook": "playbooks/gke_gpudirect.yml", "inventory": "GPU fleet", "slice": True}]),
     ["awx_job_templates_templates: Fabric: slice is set but playbooks/gke_gpudirect.yml targets clusters or a fabric"]),
    ("awx_job_templates: merged reports of another playbook", awx(awx_job_templates_templates=[
        {"name": "Hosts", "playbook": "playbooks/gpu_hosts.yml", "inventory": "GPU fleet", "slice": True, "merge_reports": True}]),
     ["awx_job_templates_templates: Hosts: merge_reports merges the reports of a sliced playbooks/validate.yml"]),
    # --- values the target would refuse only after earlier steps created things (each also in the roles' preflight)
    ("rdma_test: image with a space", rdma(rdma_test_image="mellanox/cuda-perftest latest"),
     ["rdma_test_image: 'mellanox/cuda-perftest latest' is not an image reference"]),
    ("rdma_test: namespace in capitals", rdma(rdma_test_namespace="RDMA"), ["rdma_test_namespace: 'RDMA' is not a DNS-1123 label"]),
    ("rdma_test: name prefix with an underscore", rdma(rdma_test_name_prefix="rdma_test"),
     ["rdma_test_name_prefix: 'rdma_test-server' is not a DNS-1123 subdomain"]),
    ("rdma_test: name prefix too long for its label", rdma(rdma_test_name_prefix="r" * 64),
     ["rdma_test_name_prefix: ", "at most 63"]),
    ("rdma_test: zero iterations", rdma(rdma_test_iterations=0),
     ["rdma_test_iterations: 0 is less than 1; it must be a whole number of 1 or more"]),
    ("rdma_test: negative GPU index", rdma(rdma_test_gpu_index=-1), ["rdma_test_gpu_index: -1 is negative"]),
    ("gpu_operator: vector-add image with a space", role("gpu_operator", gpu_operator_vectoradd_image="cuda-sample vectoradd"),
     ["gpu_operator_vectoradd_image: 'cuda-sample vectoradd' is not an image reference"]),
    ("gpu_operator: vector-add pod name with an underscore", role("gpu_operator", gpu_operator_vectoradd_name="vector_add"),
     ["gpu_operator_vectoradd_name: 'vector_add' is not a DNS-1123 subdomain"]),
    ("nccl_test: size nccl-tests cannot read", role("nccl_test", nccl_test_min_bytes="1T"),
     ["nccl_test_min_bytes: '1T' is not a message size nccl-tests reads", "K, M or G"]),
    ("nccl_test: smallest size above the largest", role("nccl_test", nccl_test_min_bytes="8G", nccl_test_max_bytes="1M"),
     ["nccl_test_min_bytes, nccl_test_max_bytes: the smallest size '8G' is larger than the largest '1M'"]),
    ("gke_gpu_cluster: fabric poll of 0 seconds", cluster(gke_gpu_cluster_fabric_wait_delay=0),
     ["gke_gpu_cluster_fabric_wait_delay: 0 is less than 1"]),
    ("gcp_gpu_vpcs: background poll of 0 seconds",
     role("gcp_gpu_vpcs", gcp_gpu_vpcs_cluster="c", gcp_gpu_vpcs_location="us-central1", gcp_gpu_vpcs_background_delay=0),
     ["gcp_gpu_vpcs_background_delay: 0 is less than 1"]),
    ("gcp_gpu_vpcs: negative background limit",
     role("gcp_gpu_vpcs", gcp_gpu_vpcs_cluster="c", gcp_gpu_vpcs_location="us-central1", gcp_gpu_vpcs_background_timeout=-60),
     ["gcp_gpu_vpcs_background_timeout: -60 is less than 1"]),
    ("validate: phase misspelt", role("validate", validate_phases=["deployment", "preformance"]),
     ["validate_phases[1]: 'preformance' is not a phase; choose from preflight, deployment, conformance"]),
    ("validate: unknown check id", role("validate", validate_checks=["gpu.allocatabel"]),
     ["validate_checks[0]: 'gpu.allocatabel' is not a check id", "gpu.allocatable"]),
    ("validate: check of a phase that does not run", role("validate", validate_checks=["perf.ib_write_bw"]),
     ["validate_checks[0]: perf.ib_write_bw is a check of the performance phase", "would not run"]),
    ("validate: tolerance of 1.5", role("validate", validate_performance_tolerance=1.5),
     ["validate_performance_tolerance: 1.5 is outside [0, 1)"]),
    ("validate: probe namespace in capitals", role("validate", validate_performance_namespace="Probes"),
     ["validate_performance_namespace: 'Probes' is not a DNS-1123 label"]),
    ("validate: negative probe timeout", role("validate", validate_performance_timeout=-1),
     ["validate_performance_timeout: -1 is negative"]),
    ("validate: collective misspelt", role("validate", validate_performance_nccl_benchmarks=["allreduce"]),
     ["validate_performance_nccl_benchmarks", "all_gather, all_reduce"]),
    ("validate: GKE cluster without location", role("validate", validate_gke={"cluster": "a3mega"}),
     ["validate_gke needs cluster and location"]),
]


def _case_tasks(index, title, role, entry, role_vars):
    record = "{{ outcomes | combine({%s: ansible_failed_result.msg | default('failed') | string}) }}" % json.dumps(title)
    return {
        "name": "case %02d" % index,
        "vars": dict(role_vars, gpu_ops_render_dir="{{ render_root }}/case-%02d" % index),
        "block": [
            {"name": "include %s" % title,
             "ansible.builtin.include_role": {"name": "gpu_ops.cluster.%s" % role, "tasks_from": entry}},
            {"name": "accepted %02d" % index,
             "ansible.builtin.set_fact": {"outcomes": "{{ outcomes | combine({%s: 'ACCEPTED'}) }}" % json.dumps(title)}},
        ],
        "rescue": [{"name": "record %02d" % index, "ansible.builtin.set_fact": {"outcomes": record}}],
    }


@pytest.fixture(scope="module")
def outcomes(run_playbook_module, tmp_path_factory):
    render_root = tmp_path_factory.mktemp("role-bad-inputs")
    tasks = [{"name": "start", "ansible.builtin.set_fact": {"outcomes": {}}}]
    tasks += [_case_tasks(i, title, *case) for i, (title, case, _words) in enumerate(CASES)]
    tasks.append({"name": "outcomes of every case", "ansible.builtin.debug": {"var": "outcomes"}})
    play = [{"name": "role bad inputs", "hosts": "localhost", "gather_facts": False,
             "vars": {"render_root": str(render_root)}, "tasks": tasks}]
    result = run_playbook_module(play)
    report = result.task("outcomes of every case")["result"]["outcomes"]
    return dict(report=report, output=result.output, recorded=json.dumps(result.results), render_root=render_root)


def test_the_table_is_large_enough():
    assert len(CASES) >= 20 and len(set(c[0] for c in CASES)) == len(CASES)


@pytest.mark.parametrize("index, title, words", [(i, c[0], c[2]) for i, c in enumerate(CASES)], ids=[c[0] for c in CASES])
def test_bad_role_input_fails_naming_it_before_anything_is_written(outcomes, index, title, words):
    message = outcomes["report"].get(title)
    assert message is not None, outcomes["output"]
    assert message != "ACCEPTED", "%s: accepted" % title
    for word in words:
        assert word in message, "%s: %r not in %s" % (title, word, message)
    assert not (outcomes["render_root"] / ("case-%02d" % index)).exists(), "%s: something was rendered" % title


def test_no_secret_in_any_output(outcomes):
    assert SECRET_MARK not in outcomes["output"]
    assert SECRET_MARK not in json.dumps(outcomes["report"])
    assert SECRET_MARK not in outcomes["recorded"]
