# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kubernetes.core features work against the Kubernetes API double (real ansible-playbook runs).

SUPPORTED runs every module flow the collection's roles may use and must pass; UNSUPPORTED
records, task by task, that the flows the double cannot serve fail loudly (never pass silently).
"""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT

# group/kubernetes.core.k8s does not hold k8s_cluster_info, k8s_json_patch, k8s_taint or k8s_rollback:
# module_defaults do not reach them, so they name the kubeconfig themselves (or use K8S_AUTH_KUBECONFIG).
SUPPORTED = """
- name: kubernetes.core against the API double
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s:
      kubeconfig: "{{ kubeconfig }}"
  tasks:
    - name: Cluster info (discovery)
      kubernetes.core.k8s_cluster_info:
        kubeconfig: "{{ kubeconfig }}"
      register: info
      no_log: true

    - name: Discovery lists the custom resources
      ansible.builtin.assert:
        that:
          - "'Network' in info.apis['networking.gke.io/v1']"
          - "'NicClusterPolicy' in info.apis['mellanox.com/v1alpha1']"
          - info.version.server.kubernetes.minor == '33'

    - name: Create a namespace
      kubernetes.core.k8s:
        definition: {apiVersion: v1, kind: Namespace, metadata: {name: probe}}

    - name: Create a labelled ConfigMap
      kubernetes.core.k8s:
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata: {name: probe-cm, namespace: probe, labels: {tier: test}}
          data: {a: "1"}

    - name: Check mode create is a server-side dry run
      kubernetes.core.k8s:
        definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: dry, namespace: probe}, data: {a: "1"}}
      check_mode: true
      register: dry

    - name: List by label and by field
      kubernetes.core.k8s_info:
        kind: ConfigMap
        namespace: probe
        label_selectors: ["tier=test"]
        field_selectors: ["metadata.name=probe-cm"]
      register: listed

    - name: Selectors and dry run behave
      ansible.builtin.assert:
        that:
          - dry is changed
          - listed.resources | length == 1
          - listed.resources[0].metadata.name == 'probe-cm'

    - name: state patched
      kubernetes.core.k8s:
        state: patched
        definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe-cm, namespace: probe}, data: {b: "2"}}

    - name: JSON patch
      kubernetes.core.k8s_json_patch:
        kubeconfig: "{{ kubeconfig }}"
        kind: ConfigMap
        namespace: probe
        name: probe-cm
        patch:
          - {op: replace, path: /data/a, value: "10"}

    - name: Replace (force)
      kubernetes.core.k8s:
        force: true
        definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: probe-cm, namespace: probe, labels: {tier: test}},
                     data: {a: "11"}}
      register: replaced

    - name: Replace removed the key that the patches had added
      ansible.builtin.assert:
        that:
          - "replaced.result.data == {'a': '11'}"
          - replaced.method == 'replace'

    - name: DaemonSet with wait (client-side apply)
      kubernetes.core.k8s:
        apply: true
        wait: true
        wait_timeout: 30
        wait_sleep: 1
        definition:
          apiVersion: apps/v1
          kind: DaemonSet
          metadata: {name: probe-ds, namespace: probe}
          spec:
            selector: {matchLabels: {app: probe-ds}}
            template:
              metadata: {labels: {app: probe-ds}}
              spec:
                tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
                containers: [{name: c, image: "repo/ds:1"}]

    - name: Deployment
      kubernetes.core.k8s:
        wait: true
        wait_sleep: 1
        wait_timeout: 30
        definition:
          apiVersion: apps/v1
          kind: Deployment
          metadata: {name: probe-web, namespace: probe}
          spec:
            replicas: 1
            selector: {matchLabels: {app: probe-web}}
            template:
              metadata: {labels: {app: probe-web}}
              spec: {containers: [{name: c, image: "repo/web:1"}]}

    - name: Scale the Deployment
      kubernetes.core.k8s_scale:
        kind: Deployment
        name: probe-web
        namespace: probe
        replicas: 3
        wait_timeout: 30
      register: scaled

    - name: Service
      kubernetes.core.k8s_service:
        name: probe-svc
        namespace: probe
        selector: {app: probe-web}
        ports: [{port: 80, targetPort: 8080}]

    - name: Job
      kubernetes.core.k8s:
        definition:
          apiVersion: batch/v1
          kind: Job
          metadata: {name: nccl-probe, namespace: probe}
          spec:
            template:
              spec:
                restartPolicy: Never
                containers: [{name: nccl, image: "repo/nccl:1"}]

    - name: Wait for the Job to complete
      kubernetes.core.k8s_info:
        kind: Job
        name: nccl-probe
        namespace: probe
        wait: true
        wait_sleep: 1
        wait_timeout: 30
        wait_condition: {type: Complete, status: "True"}
      register: job

    - name: Read the Job's pod log
      kubernetes.core.k8s_log:
        namespace: probe
        label_selectors: ["job-name=nccl-probe"]
      register: job_log

    - name: Exec a scripted command (websocket)
      kubernetes.core.k8s_exec:
        namespace: default
        pod: runner
        command: nvidia-smi -L
      register: smi

    - name: Exec a scripted failing command
      kubernetes.core.k8s_exec:
        namespace: default
        pod: runner
        command: /bin/false
      register: false_rc
      failed_when: false_rc.rc != 1

    - name: Taint a node
      kubernetes.core.k8s_taint:
        kubeconfig: "{{ kubeconfig }}"
        name: cpu-0
        taints: [{key: maintenance, value: "true", effect: NoSchedule}]

    - name: Drain a node (eviction)
      kubernetes.core.k8s_drain:
        name: cpu-1
        delete_options: {force: true, ignore_daemonsets: true, wait_timeout: 20, wait_sleep: 1}

    - name: Delete the Network with wait
      kubernetes.core.k8s:
        state: absent
        wait: true
        wait_sleep: 1
        definition: {apiVersion: networking.gke.io/v1, kind: Network, metadata: {name: probe-net}}
      register: deleted

    - name: Results are what the API double served
      ansible.builtin.assert:
        that:
          - scaled.result.spec.replicas == 3
          - job.resources[0].status.succeeded == 1
          - "'Avg bus bandwidth' in job_log.log"
          - deleted is changed
          - "smi.stdout_lines == ['GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)']"
          - smi.rc == 0
          - false_rc.stderr == 'failed'
"""

UNSUPPORTED = """
- name: kubernetes.core flows the API double refuses
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s:
      kubeconfig: "{{ kubeconfig }}"
  tasks:
    - name: k8s_exec
      kubernetes.core.k8s_exec:
        namespace: default
        pod: runner
        command: nvidia-smi -L
      ignore_errors: true

    - name: server_side_apply
      kubernetes.core.k8s:
        apply: true
        server_side_apply: {field_manager: gpu-ops}
        definition: {apiVersion: v1, kind: ConfigMap, metadata: {name: ssa, namespace: default}, data: {a: "1"}}
      ignore_errors: true

    - name: k8s_cp
      kubernetes.core.k8s_cp:
        namespace: default
        pod: runner
        remote_path: /tmp/x
        content: "x"
        state: to_pod
      ignore_errors: true

    # helm reads the kubeconfig through client-go, which sends credentials only over TLS: K8sDouble(tls=True)
    - name: helm
      kubernetes.core.helm:
        kubeconfig: "{{ kubeconfig }}"
        name: gpu-operator
        chart_ref: nvidia/gpu-operator
        release_namespace: gpu-operator
      ignore_errors: true
"""


def test_supported_kubernetes_core_flows(run_playbook, k8s_double):
    k8s_double.add_node("gpu-0", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
                        allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    k8s_double.add_node("cpu-0")
    k8s_double.add_node("cpu-1")
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray", "namespace": "default"},
                    "spec": {"nodeName": "cpu-1", "containers": [{"name": "c", "image": "repo/c:1"}]}})
    k8s_double.put({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "probe-net"},
                    "spec": {"type": "L3"}})
    k8s_double.script_pod("^nccl-probe", phase="Succeeded", logs="# Avg bus bandwidth    : 189.2\n")
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner", "namespace": "default"},
                    "spec": {"nodeName": "gpu-0", "tolerations": [{"operator": "Exists"}],
                             "containers": [{"name": "c", "image": "repo/c:1"}]}})
    k8s_double.script_exec("^runner$", "^nvidia-smi -L$", stdout="GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n")
    k8s_double.script_exec("^runner$", "^/bin/false$", stderr="failed", rc=1)

    result = run_playbook(SUPPORTED, extra_vars={"kubeconfig": k8s_double.kubeconfig})

    result.assert_ok()
    assert k8s_double.get("ConfigMap", "dry", "probe") is None
    assert k8s_double.get("Node", "cpu-0")["spec"]["taints"] == [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]
    assert k8s_double.get("Node", "cpu-1")["spec"]["unschedulable"] is True
    assert k8s_double.get("Pod", "stray", "default") is None
    assert k8s_double.get("Service", "probe-svc", "probe")["spec"]["clusterIP"]
    assert k8s_double.get("Network", "probe-net") is None
    verbs = {(r.verb, r.kind) for r in k8s_double.requests()}
    assert {("update", "ConfigMap"), ("patch", "Deployment"), ("create", "Pod")} <= verbs


@pytest.fixture(scope="module")
def unsupported_result(run_playbook_module, k8s_double_module):
    """One playbook run serves every parametrized case below."""
    k8s_double_module.add_node("n0")
    k8s_double_module.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "repo/c:1"}]}})
    return run_playbook_module(UNSUPPORTED, extra_vars={"kubeconfig": k8s_double_module.kubeconfig}).assert_ok()


@pytest.mark.parametrize("task, message", [
    ("k8s_exec", "only for commands given to script_exec()"),
    ("server_side_apply", "server-side apply is not supported"),
    ("k8s_cp", "only for commands given to script_exec()"),
    ("helm", "the server has asked for the client to provide credentials"),
])
def test_unsupported_flows_fail_loudly(unsupported_result, task, message):
    record = unsupported_result.task(task)
    assert record["status"] == "ignored", record
    assert message.lower() in str(record["result"]).lower(), record["result"]
