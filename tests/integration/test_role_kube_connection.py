# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The play's Kubernetes connection (module_defaults of group/gpu_ops.cluster.k8s, or of kubernetes.core's own groups,
and the playbooks' gpu_ops_kubeconfig / gpu_ops_context) against the Kubernetes API double.

No K8S_AUTH_* variable is set and KUBECONFIG names a file that does not exist, so kubernetes.core's own resolution
finds no cluster: the roles reach the double only through the play's connection. The kubeconfig holds two contexts;
its current one points at a closed port, so a run that ignored the context would fail.
"""

from __future__ import annotations

import json
import os

import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT, K8sDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, chart_path

NAMESPACE = "kube-connection"
CONFIGMAP = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "reached", "namespace": NAMESPACE},
              "data": {"through": "the play's connection"}}]
# the one reading of gpu_ops_kubeconfig and gpu_ops_context that the playbooks load
CONNECTION_VARS = str(REPO_ROOT / "playbooks" / "vars" / "kubernetes.yml")
PLAYBOOK_DEFAULTS = {"group/gpu_ops.cluster.k8s": "{{ gpu_ops_k8s_connection }}"}


def _two_contexts(double, folder):
    """A kubeconfig whose current context points nowhere (127.0.0.1:1) and whose context 'gpu' is the double."""
    path = double.write_kubeconfig(str(folder / "two-contexts.yaml"), context="gpu")
    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    config["clusters"].append({"name": "elsewhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"].append({"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "gpu"}})
    config["current-context"] = "elsewhere"
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(config, handle)
    return path


def _no_default_cluster(folder, **extra):
    """Environment without any Kubernetes connection of its own (conftest drops K8S_AUTH_* already)."""
    return dict({"KUBECONFIG": str(folder / "no-such-kubeconfig")}, **extra)


def _play(role, role_vars, tasks_from="main", module_defaults=None, vars_files=None):
    play = {"name": role, "hosts": "localhost", "gather_facts": False,
            "tasks": [{"name": "Run the role",
                       "ansible.builtin.include_role": {"name": "gpu_ops.cluster." + role, "tasks_from": tasks_from},
                       "vars": role_vars}]}
    if module_defaults:
        play["module_defaults"] = module_defaults
    if vars_files:
        play["vars_files"] = vars_files
    return [play]


def _connection(kubeconfig=None, context=None):
    """module_defaults of group/gpu_ops.cluster.k8s with the options given."""
    given = dict((k, v) for k, v in (("kubeconfig", kubeconfig), ("context", context)) if v is not None)
    return {"group/gpu_ops.cluster.k8s": given} if given else None


def _apply(module_defaults=None, vars_files=None, **extra):
    role_vars = dict({"apply_step": "10-connection", "apply_manifests": CONFIGMAP}, **extra)
    return _play("apply", role_vars, tasks_from="manifests", module_defaults=module_defaults, vars_files=vars_files)


def _as_playbooks_do(kubeconfig, context, **extra):
    """The play as the collection's playbooks write it: the vars file and the group's module_defaults, with
    gpu_ops_kubeconfig and gpu_ops_context as play vars (host vars in an inventory of clusters)."""
    play = _apply(PLAYBOOK_DEFAULTS, [CONNECTION_VARS], **extra)
    play[0]["vars"] = {"gpu_ops_kubeconfig": kubeconfig, "gpu_ops_context": context}
    return play


def test_apply_reaches_the_cluster_only_through_the_play_connection(run_playbook, k8s_double, tmp_path):
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    env = _no_default_cluster(tmp_path)

    # nothing given: kubernetes.core finds no cluster
    run_playbook(_apply(), env=env).assert_failed()
    # the kubeconfig alone: its current context points at a closed port
    failed = run_playbook(_apply(_connection(kubeconfig)), env=env).assert_failed()
    assert "127.0.0.1" in failed.stdout and k8s_double.get("Namespace", NAMESPACE) is None
    # kubeconfig and context: the objects are created in the double
    run_playbook(_apply(_connection(kubeconfig, "gpu")), env=env).assert_ok()
    assert k8s_double.get("ConfigMap", "reached", NAMESPACE)["data"] == {"through": "the play's connection"}
    # the kubeconfig as a dict, as kubernetes.core takes it: same objects, nothing changed
    with open(kubeconfig, encoding="utf-8") as handle:
        as_dict = yaml.safe_load(handle)
    k8s_double.clear_requests()
    run_playbook(_apply(_connection(as_dict, "gpu")), env=env).assert_ok()
    assert [w for w in k8s_double.writes() if w.changed] == []
    assert k8s_double.requests(), "the dict kubeconfig reached the double"


def test_the_playbooks_connection_reads_gpu_ops_kubeconfig_and_gpu_ops_context(run_playbook, k8s_double, tmp_path):
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    env = _no_default_cluster(tmp_path)
    run_playbook(_as_playbooks_do(kubeconfig, "gpu"), env=env).assert_ok()
    assert k8s_double.get("ConfigMap", "reached", NAMESPACE) is not None
    # without the context: the kubeconfig's current one, the closed port
    failed = run_playbook(_as_playbooks_do(kubeconfig, ""), env=env).assert_failed()
    assert "127.0.0.1" in failed.stdout
    # empty strings (an AWX survey's unanswered question) count as unset: no cluster is found at all
    k8s_double.clear_requests()
    failed = run_playbook(_as_playbooks_do("", ""), env=env).assert_failed()
    assert "127.0.0.1" not in failed.stdout and k8s_double.requests() == []
    # the kubeconfig gke_gpu_cluster writes stands in for an unset gpu_ops_kubeconfig
    play = _as_playbooks_do("", "gpu")
    play[0]["vars"]["gke_gpu_cluster_kubeconfig"] = kubeconfig
    run_playbook(play, env=env).assert_ok()
    assert k8s_double.requests()


def test_render_mode_ignores_the_connection(run_playbook, k8s_double, tmp_path):
    render = tmp_path / "rendered"
    run_playbook(_as_playbooks_do(str(tmp_path / "missing-kubeconfig"), "missing-context", gpu_ops_render_dir=str(render)),
                 env=_no_default_cluster(tmp_path)).assert_ok()
    assert sorted(os.listdir(render / "manifests" / "10-connection")) == ["01-namespace-kube-connection.yaml",
                                                                          "02-configmap-reached.yaml"]
    assert k8s_double.requests() == []


def _gpu_nodes(double):
    # the NRI injector's wait looks for nodes carrying a GKE GPUDirect accelerator label
    for name in ("gpu-0", "gpu-1"):
        double.add_node(name, labels={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
                        allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])


def test_nri_device_injector_and_the_roles_it_includes_use_the_play_connection(run_playbook, k8s_double, tmp_path):
    """The role's tasks, the apply role it includes and gpudirect_installer's wait all reach the double."""
    _gpu_nodes(k8s_double)
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    env = _no_default_cluster(tmp_path)
    fast = {"nri_device_injector_wait_delay": 1, "nri_device_injector_wait_timeout": 4}

    result = run_playbook(_play("nri_device_injector", fast, module_defaults=_connection(kubeconfig, "gpu")),
                          env=env).assert_ok()
    assert k8s_double.get("DaemonSet", "device-injector", "kube-system") is not None
    [wait] = result.tasks("Wait for a ready pod of DaemonSet kube-system/device-injector", action="k8s_daemonset_wait")
    assert wait["status"] == "ok" and wait["result"]["in_worker"], "gpudirect_installer's wait ran"

    # kubernetes.core's own group (the kubeconfig) and the collection's (the context) combine option by option
    group = {"group/kubernetes.core.k8s": {"kubeconfig": kubeconfig}}
    k8s_double.clear_requests()
    run_playbook(_play("nri_device_injector", fast, module_defaults=dict(group, **_connection(context="gpu"))),
                 env=env).assert_ok()
    assert k8s_double.requests() and [w for w in k8s_double.writes() if w.changed] == []
    # without the context the kubeconfig alone points at the closed port
    run_playbook(_play("nri_device_injector", fast, module_defaults=group), env=env).assert_failed()


def test_nvidia_device_plugin_helm_release_uses_the_play_connection(run_playbook, helm_k8s, tmp_path):
    """kubernetes.core.helm (in group/gpu_ops.cluster.k8s through kubernetes.core's helm group) gets the kubeconfig and
    the context too."""
    pool = {"kubernetes.azure.com/agentpool": "gpupool"}
    gfd = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
           "nvidia.com/gpu.count": "56"}
    for index in range(2):
        helm_k8s.add_node("aks-gpupool-%d" % index, labels=dict(pool, **gfd), allocatable={"nvidia.com/gpu": "56"},
                          taints=[GPU_TAINT])
    kubeconfig = _two_contexts(helm_k8s, tmp_path)
    # helm's own folders and binary, but none of the fixture's KUBECONFIG / K8S_AUTH_KUBECONFIG
    env = _no_default_cluster(tmp_path, **{k: v for k, v in helm_k8s.helm_env.items()
                                           if k.startswith("HELM_") or k == "PATH"})
    role_vars = {
        "nvidia_device_plugin_chart_ref": chart_path("nvidia-device-plugin"),
        "nvidia_device_plugin_chart_repo_url": "",
        "nvidia_device_plugin_mig_strategy": "single",
        "nvidia_device_plugin_aks_vm_size": "Standard_ND96asr_v4",
        "nvidia_device_plugin_aks_gpu_instance_profile": "MIG1g",
        "nvidia_device_plugin_node_selector": pool,
        "nvidia_device_plugin_pool_selector": pool,
        "nvidia_device_plugin_wait_timeout": 60,
        "nvidia_device_plugin_verify": True,
        "nvidia_device_plugin_verify_retries": 1,
        "nvidia_device_plugin_verify_delay": 0,
    }
    # the kubeconfig without the context: helm goes to the current context, the closed port
    failed = run_playbook(_play("nvidia_device_plugin", role_vars, module_defaults=_connection(kubeconfig)),
                          env=env).assert_failed()
    assert failed.task("Install release nvidia-device-plugin")["status"] == "failed"

    result = run_playbook(_play("nvidia_device_plugin", role_vars, module_defaults=_connection(kubeconfig, "gpu")),
                          env=env).assert_ok()
    helm = result.task("Install release nvidia-device-plugin")["result"]
    assert helm["changed"]  # the context reaches helm as HELM_KUBECONTEXT, the kubeconfig as KUBECONFIG
    assert [s for s in helm_k8s.list("Secret", "nvidia-device-plugin") if s.get("type") == "helm.sh/release.v1"]
    assert helm_k8s.get("DaemonSet", "nvidia-device-plugin", "nvidia-device-plugin") is not None


# ---------------------------------------------------------------- the reads in the worker (gpu_ops.cluster.k8s_apply_plan)
def _read_in_worker(result):
    record = [r for r in result.results if r["task"].endswith("Read the objects to skip those already in place in step 10-connection")]
    assert len(record) == 1, result.output
    return record[0]["result"]


def _in_place(result):
    """Whether the step's calls were all in place: no kubernetes.core.k8s task ran (the include that sends was skipped)."""
    return _read_in_worker(result)["in_place"] and not [r for r in result.results if r["action"] == "kubernetes.core.k8s"]


def test_the_read_in_the_worker_uses_the_same_connection_as_kubernetes_core(run_playbook, k8s_double, tmp_path):
    """The collection's group, kubernetes.core's module_defaults and K8S_AUTH_* all reach the double from the worker."""
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    env = _no_default_cluster(tmp_path)
    run_playbook(_apply(_connection(kubeconfig, "gpu")), env=env).assert_ok()

    k8s_double.clear_requests()
    result = run_playbook(_apply(_connection(kubeconfig, "gpu")), env=env, verbosity=3).assert_ok()
    read = _read_in_worker(result)
    assert read["in_worker"] and _in_place(result)
    assert [(r.verb, r.kind) for r in k8s_double.requests() if r.verb != "discovery"] == [("get", "Namespace"), ("get", "ConfigMap")]
    assert k8s_double.token not in result.stdout + result.stderr

    # module_defaults of group/kubernetes.core.k8s (kubeconfig) and of kubernetes.core.k8s_info (context)
    defaults = {"group/kubernetes.core.k8s": {"kubeconfig": kubeconfig}, "kubernetes.core.k8s_info": {"context": "gpu"},
                "kubernetes.core.k8s": {"context": "gpu"}}
    result = run_playbook(_play("apply", {"apply_step": "10-connection", "apply_manifests": CONFIGMAP},
                                tasks_from="manifests", module_defaults=defaults), env=env).assert_ok()
    assert _read_in_worker(result)["in_worker"] and _in_place(result)

    # the K8S_AUTH_* environment, as kubernetes.core reads it
    auth_env = _no_default_cluster(tmp_path, K8S_AUTH_KUBECONFIG=kubeconfig, K8S_AUTH_CONTEXT="gpu")
    result = run_playbook(_apply(), env=auth_env).assert_ok()
    assert _read_in_worker(result)["in_worker"] and _in_place(result)


def test_a_wrong_context_fails_with_a_clear_message_and_no_secret(run_playbook, k8s_double, tmp_path):
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    env = _no_default_cluster(tmp_path)
    with open(kubeconfig, encoding="utf-8") as handle:
        as_dict = yaml.safe_load(handle)

    # a path and a dict: the read in the worker says why (and skips nothing), the apply then fails with kubernetes.core's
    # own message; neither shows the kubeconfig's token
    for given in (kubeconfig, as_dict):
        play = _apply(_connection(given, "no-such-context"))
        if isinstance(given, dict):
            # a play of its own that passes a dict sets what playbooks/vars/kubernetes.yml sets (README, "Kubernetes
            # credentials"): on ansible-core 2.21 the modules then return their arguments masked
            play[0]["vars"] = {"ansible_inject_invocation": True}
        result = run_playbook(play, env=env, verbosity=3).assert_failed()
        read = _read_in_worker(result)
        error = read["read_error"]
        assert error.startswith("k8s_objects_info: Could not create API client:") and "no-such-context" in error
        assert read["in_place"] is False and read["reads"] == [] and not read.get("failed")
        [failed] = result.failed
        assert failed["action"] == "kubernetes.core.k8s" and "no-such-context" in result.stdout
        assert k8s_double.token not in result.stdout + result.stderr
    assert k8s_double.requests() == []


def test_the_read_in_the_worker_leaves_no_certificate_file_behind(run_playbook, tmp_path):
    """The kubernetes client writes a kubeconfig's certificate data to temporary files and removes them at exit through
    atexit, which an Ansible worker (os._exit) never runs: the read removes them itself."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    with K8sDouble(tls=True) as double:
        kubeconfig = double.write_kubeconfig(str(tmp_path / "tls.yaml"), context="gpu")
        result = run_playbook(_apply(_connection(kubeconfig, "gpu")), env=_no_default_cluster(tmp_path, TMPDIR=str(temp))).assert_ok()
        assert _read_in_worker(result)["in_worker"]
        assert double.get("ConfigMap", "reached", NAMESPACE) is not None
        with open(double.ca_file, encoding="ascii") as handle:
            ca = handle.read().strip()
    left = [str(p) for p in temp.rglob("*") if p.is_file() and ca in p.read_text(errors="replace")]
    assert left == [], "certificate data left in temporary files"


def test_a_kubeconfig_dict_given_the_playbooks_way_shows_no_token_at_vvv(run_playbook, k8s_double, tmp_path):
    """gpu_ops_kubeconfig as a dict (inventory or extra vars): at -vvv the task results show the modules' arguments, and
    ansible-core 2.21 would show the dict as given; playbooks/vars/kubernetes.yml has the modules return them masked."""
    kubeconfig = _two_contexts(k8s_double, tmp_path)
    with open(kubeconfig, encoding="utf-8") as handle:
        as_dict = yaml.safe_load(handle)
    env = _no_default_cluster(tmp_path)
    for context, ok in (("gpu", True), ("no-such-context", False)):
        play = _apply(PLAYBOOK_DEFAULTS, [CONNECTION_VARS])
        result = run_playbook(play, extra_vars={"gpu_ops_kubeconfig": as_dict, "gpu_ops_context": context}, env=env, verbosity=3)
        if ok:
            result.assert_ok()
            assert k8s_double.get("ConfigMap", "reached", NAMESPACE) is not None
        else:
            result.assert_failed()
            assert "no-such-context" in result.stdout
        assert "module_args" in result.stdout, "the -vvv output shows the modules' arguments"
        shown = result.stdout + result.stderr + json.dumps([r["result"] for r in result.results])
        assert k8s_double.token not in shown, context
