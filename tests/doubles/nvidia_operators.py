# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the NVIDIA GPU Operator, the Network Operator and Multus do in a cluster, played against the
Kubernetes API double (``tests/doubles/k8s.py``) by a polling thread.

- ClusterPolicy (with ``gpu_namespace``): reads the spec the chart rendered, as the GPU Operator does: with
  ``spec.driver.enabled`` it runs the driver DaemonSet ``nvidia-driver-daemonset`` in the operator namespace
  with the sidecars the spec implies (``driver.rdma.enabled`` -> ``nvidia-peermem-ctr``, ``gds.enabled`` ->
  ``nvidia-fs-ctr``, ``gdrcopy.enabled`` -> ``nvidia-gdrcopy-ctr``), gives the peermem sidecar its load
  message, and reports ``status.state`` (ready, or notReady when the driver pods are not ready) with a Ready
  condition. A spec change (``metadata.generation``) is reconciled again, DaemonSet included.
- Driver upgrades (``driver_upgrades=True``): the driver DaemonSet is ``OnDelete`` with the ``k8s-driver-manager``
  init container; when the ClusterPolicy's driver image changes, the upgrade controller's part is played on the node
  label ``nvidia.com/gpu-driver-upgrade-state`` (states of NVIDIA/k8s-operator-libs pkg/upgrade/consts.go, written
  out here): every driver node not labelled ``nvidia.com/gpu-driver-upgrade.skip=true`` goes upgrade-required ->
  cordon-required (unschedulable) -> wait-for-jobs-required -> pod-deletion-required -> drain-required ->
  pod-restart-required (its driver pod deleted: the DaemonSet makes one of the new template) -> validation-required
  (until that pod is ready) -> uncordon-required -> upgrade-done, one state per ``upgrade_step`` seconds, at most
  ``driver.upgradePolicy.maxParallelUpgrades`` nodes past upgrade-required at once; with ``paced_by_reads`` a node
  moves on only after the nodes were listed since its last move (a test on a slow machine sees every state). A node
  in ``stuck`` (name -> the
  driver manager's log) stays in upgrade-required with its driver pod's init container in CrashLoopBackOff and that
  log, until ``unstick``.
- NicClusterPolicy: ready (or notReady with the RDMA device plugin's message) with its appliedStates.
- MacvlanNetwork: ready with its NetworkAttachmentDefinition name; pods asking for a network get a Multus
  ``network-status`` annotation with an address on it.
"""

from __future__ import annotations

import datetime
import json
import threading
import time

DRIVER_DAEMONSET = "nvidia-driver-daemonset"
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_MANAGER = "k8s-driver-manager"
UPGRADE_PATH = ("upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
                "pod-restart-required", "validation-required", "uncordon-required", "upgrade-done")
PEERMEM_LOG = "waiting for mellanox ofed and nvidia drivers to be installed\nsuccessfully loaded nvidia-peermem module\n"
_SIDECARS = (("nvidia-peermem-ctr", ("driver", "rdma", "enabled")), ("nvidia-fs-ctr", ("gds", "enabled")),
             ("nvidia-gdrcopy-ctr", ("gdrcopy", "enabled")))


def _dig(obj, path):
    for key in path:
        obj = (obj or {}).get(key)
    return obj


def driver_containers(spec):
    """The driver pod's containers a ClusterPolicy spec implies (the operator's driver state)."""
    return ["nvidia-driver-ctr"] + [name for name, path in _SIDECARS if _dig(spec, path)]


class FakeOperators:
    """What the operators and Multus do once the roles' objects exist (a polling thread)."""

    def __init__(self, k8s, ncp_ready=True, gpu_namespace=None, driver_upgrades=False, upgrade_step=0.3, stuck=None,
                 paced_by_reads=False):
        self.k8s, self.ncp_ready, self.gpu_namespace = k8s, ncp_ready, gpu_namespace
        self.driver_upgrades, self.upgrade_step, self.stuck = driver_upgrades, upgrade_step, dict(stuck or {})
        self.upgrading = {}  # node -> monotonic time of its last state change
        self.paced_by_reads, self.read_at = paced_by_reads, {}  # node -> the count of node lists at its last change
        self.max_parallel = 1
        self.reconciled = {}  # ClusterPolicy name -> generation last reconciled
        self.errors = []  # what the API double refused (a test asserts it stays empty)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)

    def run(self):
        while not self.stop.wait(0.1):
            try:
                self.tick()
            except Exception as exc:  # pylint: disable=broad-exception-caught
                self.errors.append(repr(exc))  # kept for the test to assert on; the thread goes on

    def tick(self):
        if self.gpu_namespace:
            for policy in self.k8s.list("ClusterPolicy"):
                self.reconcile_cluster_policy(policy)
        self.reconcile_network_operator()

    # ---- GPU Operator ----------------------------------------------------------------------------

    def reconcile_cluster_policy(self, policy):
        k8s, namespace, name = self.k8s, self.gpu_namespace, policy["metadata"]["name"]
        generation = policy["metadata"].get("generation")
        if self.reconciled.get(name) != generation:
            self._apply_driver_daemonset(policy.get("spec") or {})
            self.reconciled[name] = generation
        if self.upgrading:
            self._advance_upgrades()
        pods = [p for p in k8s.list("Pod", namespace) if p["metadata"]["name"].startswith(DRIVER_DAEMONSET)]
        for pod in pods:
            if "nvidia-peermem-ctr" in [c["name"] for c in pod["spec"]["containers"]]:
                k8s.set_pod_log(pod["metadata"]["name"], PEERMEM_LOG, namespace, "nvidia-peermem-ctr")
        not_ready = [p["spec"].get("nodeName") for p in pods if not _ready(p)]
        state = "notReady" if not_ready else "ready"
        status = {"state": state, "namespace": namespace, "conditions": [{
            "type": "Ready", "status": "False" if not_ready else "True",
            "reason": "DriverNotReady" if not_ready else "Reconciled",
            "message": "driver not ready on %s" % ", ".join(sorted(not_ready)) if not_ready else "ClusterPolicy is ready",
            "lastTransitionTime": _now()}]}
        current = policy.get("status") or {}
        if current.get("state") != state or current.get("namespace") != namespace:
            k8s.set_status("ClusterPolicy", name, status)

    def _apply_driver_daemonset(self, spec):
        k8s, namespace = self.k8s, self.gpu_namespace
        existing = k8s.get("DaemonSet", DRIVER_DAEMONSET, namespace)
        if not _dig(spec, ("driver", "enabled")):
            if existing:
                k8s.remove("DaemonSet", DRIVER_DAEMONSET, namespace)
            return
        image = "%s/%s:%s" % (_dig(spec, ("driver", "repository")) or "nvcr.io/nvidia",
                              _dig(spec, ("driver", "image")) or "driver", _dig(spec, ("driver", "version")) or "latest")
        containers = [{"name": name, "image": image} for name in driver_containers(spec)]
        if existing:
            current = [c["name"] for c in existing["spec"]["template"]["spec"]["containers"]]
            if current == [c["name"] for c in containers]:
                if self.driver_upgrades and existing["spec"]["template"]["spec"]["containers"][0]["image"] != image:
                    self._start_upgrade(spec, image)
                return
            k8s.remove("DaemonSet", DRIVER_DAEMONSET, namespace)
        labels = {"app": DRIVER_DAEMONSET}
        k8s.put({"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": DRIVER_DAEMONSET, "namespace": namespace, "labels": labels},
                 "spec": dict({"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": dict({
                     "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
                     "tolerations": _dig(spec, ("daemonsets", "tolerations")) or [],
                     "containers": containers}, **({"initContainers": [{
                         "name": DRIVER_MANAGER, "image": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1"}]}
                         if self.driver_upgrades else {}))}}, **({"updateStrategy": {"type": "OnDelete"}} if self.driver_upgrades else {}))})

    # ---- the driver upgrade controller ---------------------------------------------------------------

    def _start_upgrade(self, spec, image):
        k8s, namespace = self.k8s, self.gpu_namespace

        def new_image(ds):
            for container in ds["spec"]["template"]["spec"]["containers"]:
                container["image"] = image
        k8s.modify("DaemonSet", DRIVER_DAEMONSET, new_image, namespace)
        self.max_parallel = _dig(spec, ("driver", "upgradePolicy", "maxParallelUpgrades"))
        self.max_parallel = 1 if self.max_parallel is None else self.max_parallel
        now = time.monotonic()
        for pod in k8s.list("Pod", namespace):
            node = pod["spec"].get("nodeName")
            if not pod["metadata"]["name"].startswith(DRIVER_DAEMONSET) or not node:
                continue
            if (k8s.get("Node", node)["metadata"].get("labels") or {}).get(SKIP_LABEL) == "true":
                continue
            self._label(node, "upgrade-required")
            self.upgrading[node], self.read_at[node] = now, self._node_reads()
            if node in self.stuck:
                k8s.hold_init(node)
                k8s.set_pod_log(pod["metadata"]["name"], self.stuck[node], namespace, DRIVER_MANAGER)

    def unstick(self, node):
        """The cause is gone (the GPU clients stopped): the node's upgrade goes on."""
        self.stuck.pop(node, None)
        self.k8s.hold_init(node, None)

    def _label(self, node, state):
        self.k8s.modify("Node", node, lambda n: n["metadata"].setdefault("labels", {}).update({STATE_LABEL: state}))

    def _node_reads(self):
        return len(self.k8s.requests("list", "Node")) if self.paced_by_reads else None

    def _advance_upgrades(self):
        k8s, now, reads = self.k8s, time.monotonic(), self._node_reads()
        states = dict((n, (k8s.get("Node", n)["metadata"].get("labels") or {}).get(STATE_LABEL)) for n in self.upgrading)
        active = [n for n, s in states.items() if s not in ("upgrade-required", "upgrade-done")]
        for node, state in sorted(states.items()):
            if state == "upgrade-done" or now - self.upgrading[node] < self.upgrade_step or node in self.stuck:
                continue
            if self.paced_by_reads and self.read_at.get(node) == reads:
                continue
            if state == "upgrade-required" and self.max_parallel and len(active) >= self.max_parallel:
                continue
            if state == "validation-required" and not self._driver_pod_ready(node):
                continue
            following = UPGRADE_PATH[UPGRADE_PATH.index(state) + 1]
            if following == "cordon-required":
                active.append(node)
            if state in ("cordon-required", "uncordon-required"):
                k8s.modify("Node", node, lambda n, u=state == "cordon-required": n.setdefault("spec", {}).update({"unschedulable": u}))
            if state == "pod-restart-required":
                for pod in self._driver_pods(node):
                    k8s.remove("Pod", pod["metadata"]["name"], self.gpu_namespace)
            self._label(node, following)
            self.upgrading[node], self.read_at[node] = now, reads

    def _driver_pods(self, node):
        return [p for p in self.k8s.list("Pod", self.gpu_namespace)
                if p["metadata"]["name"].startswith(DRIVER_DAEMONSET) and p["spec"].get("nodeName") == node]

    def _driver_pod_ready(self, node):
        return any(_ready(p) for p in self._driver_pods(node))

    # ---- Network Operator and Multus -----------------------------------------------------------

    def reconcile_network_operator(self):
        k8s = self.k8s
        for policy in k8s.list("NicClusterPolicy"):
            if "status" not in policy:
                state = "ready" if self.ncp_ready else "notReady"
                k8s.set_status("NicClusterPolicy", policy["metadata"]["name"], {"state": state, "appliedStates": [
                    {"name": "state-OFED", "state": "ignore"},
                    {"name": "state-RDMA-device-plugin", "state": state,
                     "message": "" if self.ncp_ready else "DaemonSet rdma-shared-dp-ds: 1 of 2 pods ready"},
                    {"name": "state-multus-cni", "state": "ready"}]})
        for network in k8s.list("MacvlanNetwork"):
            if "status" not in network:
                k8s.set_status("MacvlanNetwork", network["metadata"]["name"], {
                    "state": "ready", "macvlanNetworkAttachmentDef": "default/%s" % network["metadata"]["name"]})
        for pod in k8s.list("Pod", "default"):
            annotations = pod["metadata"].get("annotations") or {}
            network = annotations.get("k8s.v1.cni.cncf.io/networks")
            if network and "k8s.v1.cni.cncf.io/network-status" not in annotations:
                index = 225 + sum(map(ord, pod["metadata"]["name"])) % 20
                status = [{"name": "cbr0", "interface": "eth0", "ips": ["10.64.0.9"], "default": True},
                          {"name": "default/%s" % network, "interface": "net1", "ips": ["192.168.2.%d" % index]}]
                k8s.modify("Pod", pod["metadata"]["name"], lambda o, s=status: o["metadata"]["annotations"].update(
                    {"k8s.v1.cni.cncf.io/network-status": json.dumps(s)}), "default")


def _ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
