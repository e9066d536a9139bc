# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The same no-op as one cluster's gke_gpudirect.yml run, written the plain way: the play a user would write from the
guides without this collection, for the fleet benchmark's comparison (benchmarks/fleet.py ``--plain``).

What it does is taken from the collection's own render of that cluster (render mode, nothing read or sent): each
cloud resource the render would create is described once (``ansible.builtin.uri`` GET, as ``gcloud ... describe``
in the guides' loops), each Kubernetes manifest is applied with ``kubernetes.core.k8s`` (``apply: true``; the
DaemonSets with ``wait``, as ``kubectl apply`` and ``kubectl rollout status``), and the GPU nodes are listed with
``kubernetes.core.k8s_info``. One task per guide step, loops where the guide loops.
"""

from __future__ import annotations

import glob
import json
import os

CLOUD_HOSTS = ("https://compute.googleapis.com/", "https://container.googleapis.com/")


def _get_url(request, base):
    """The URL that describes the resource a rendered POST would create, on the double at ``base``."""
    body = request.get("body") or {}
    name = (body.get("nodePool") or body.get("cluster") or body).get("name")
    url = request["url"]
    for host in CLOUD_HOSTS:
        if url.startswith(host):
            url = base + url[len(host):]
    return "%s/%s" % (url, name)


def _kind(path):
    """networks, subnetworks, firewalls, clusters or nodePools, from a rendered request file name."""
    return os.path.basename(path).rsplit("_", 1)[-1].split(".")[0]


def play(render_dir, gcp_url, token, kubeconfig, wait_timeout=60):
    """The plain play (a list of plays, JSON is YAML) for the cluster rendered in ``render_dir``."""
    requests = {}
    for path in sorted(glob.glob(os.path.join(render_dir, "requests", "*.json"))):
        with open(path, encoding="utf-8") as handle:
            request = json.load(handle)
        if request.get("method") == "POST":
            requests.setdefault(_kind(path), []).append(_get_url(request, gcp_url))
    tasks = []
    for kind in ("networks", "subnetworks", "firewalls", "clusters", "nodePools"):
        if requests.get(kind):
            tasks.append({"name": "Describe the %s" % kind,
                          "ansible.builtin.uri": {"url": "{{ item }}", "headers": {"Authorization": "Bearer %s" % token}},
                          "loop": requests[kind], "no_log": True})
    auth = {"kubeconfig": kubeconfig}
    for step in sorted(glob.glob(os.path.join(render_dir, "manifests", "*"))):
        files = sorted(glob.glob(os.path.join(step, "*.yaml")))
        daemonsets = [f for f in files if "-daemonset-" in os.path.basename(f)]
        others = [f for f in files if f not in daemonsets]
        if others:
            tasks.append({"name": "Apply %s" % os.path.basename(step),
                          "kubernetes.core.k8s": dict(auth, src="{{ item }}", apply=True), "loop": others})
        for path in daemonsets:
            tasks.append({"name": "Apply %s and wait for its rollout" % os.path.basename(path),
                          "kubernetes.core.k8s": dict(auth, src=path, apply=True, wait=True,
                                                      wait_timeout=wait_timeout)})
    tasks.append({"name": "List the GPU nodes", "kubernetes.core.k8s_info": dict(
        auth, kind="Node", label_selectors=["cloud.google.com/gke-accelerator"]), "register": "gpu_nodes"})
    tasks.append({"name": "Every GPU node is there", "ansible.builtin.assert": {
        "that": "gpu_nodes.resources | length > 0", "quiet": True}})
    return [{"name": "The same no-op, the plain way", "hosts": "all", "gather_facts": False, "tasks": tasks}]


def write(folder, render_dir, gcp_url, token, kubeconfig):
    """The plain play's path in ``folder``."""
    path = os.path.join(folder, "plain.yml")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(play(render_dir, gcp_url, token, kubeconfig), handle, indent=1)
    return path
