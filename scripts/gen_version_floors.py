# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write docs/version-floors.md from the catalogs, so the version floors users read cannot drift from the code.

    python3 scripts/gen_version_floors.py           # rewrite docs/version-floors.md
    python3 scripts/gen_version_floors.py --check   # exit 1 when the committed file differs

tests/unit/test_version_floors_doc.py runs ``render()`` and compares it with the committed file.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "docs", "version-floors.md")
PACKAGE = "ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog."


def _catalogs():
    """The catalog modules; from a plain checkout, through a temporary ansible_collections/gpu_ops/cluster link."""
    try:
        importlib.import_module(PACKAGE + "gke_gpudirect")
    except ImportError:
        top = tempfile.mkdtemp(prefix="gpu_ops-docs-")
        atexit.register(shutil.rmtree, top, True)
        os.makedirs(os.path.join(top, "ansible_collections", "gpu_ops"))
        os.symlink(ROOT, os.path.join(top, "ansible_collections", "gpu_ops", "cluster"))
        sys.path.insert(0, top)
    return {name: importlib.import_module(PACKAGE + name)
            for name in ("gke_gpudirect", "gpu_operator", "network_operator", "gpudirect_rdma", "mig", "device_plugin")}


def _dotted(numbers):
    return ".".join(str(n) for n in numbers)


def _driver(numbers):
    major, minor, patch = numbers
    return "%d.%d.%02d" % (major, minor, patch)


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _h in headers) + " |"]
    lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return lines


def _minor_key(minor):
    return tuple(int(p) for p in minor.split("."))


def _series_key(series):
    return tuple(int(p) for p in series.lstrip("v").split("."))


def _gke(gke):
    lines = ["## GKE GPUDirect: minimum GKE version per profile", "",
             "Modules gke_cluster and gpu_nodepool refuse a GKE version below these (`version_gate_error`): a minor older",
             "than the first one listed is refused, a listed minor needs at least its patch, a newer minor is accepted.",
             "Choose the cluster's release channel and version against this table.", ""]
    minors = sorted({m for p in gke.PROFILES.values() for m in p["min_versions"]}, key=_minor_key)
    rows = []
    for name in gke.PROFILE_NAMES:
        profile = gke.PROFILES[name]
        machines = ", ".join("%s (%s)" % (m, gke.MACHINES[m]["description"]) for m in profile["machine_types"])
        rows.append(["`%s`" % name, machines] + [
            ("`%s`" % profile["min_versions"][m]) if m in profile["min_versions"] else
            ("refused" if profile["min_versions"] and _minor_key(m) < min(_minor_key(k) for k in profile["min_versions"])
             else ("any patch" if profile["min_versions"] else "any")) for m in minors])
    lines += _table(["profile", "machines"] + ["GKE %s" % m for m in minors], rows)
    untabled = [n for n in gke.PROFILE_NAMES if not gke.PROFILES[n]["min_versions"]]
    if untabled:
        lines += ["", "No minimum is verified for %s: every version is accepted." % ", ".join("`%s`" % n for n in untabled)]
    lines += ["", "Native sidecar containers (the RxDM daemon as an init container with `restartPolicy: Always`) need GKE",
              "%s or newer; below it the daemon runs as a classic sidecar." % gke.NATIVE_SIDECAR_MIN_GKE, "",
              "### NCCL plugin release per GKE minor", "",
              "The newest release whose first GKE minor the cluster reaches is installed (installer and RxDM daemon go together).", ""]
    rows = []
    for name in sorted(gke.RELEASES):
        for release in gke.RELEASES[name]:
            daemon = release["daemon"]["tag"] if release["daemon"] else "none"
            rows.append(["`%s`" % name, "`%s`" % release["name"], release["gke_from"] or "any (baseline)",
                         release["installer"]["tag"], daemon, release["nccl"] or "not stated"])
    lines += _table(["profile", "release", "from GKE minor", "installer tag", "RxDM daemon tag", "NCCL"], rows)
    return lines


def _gpu_operator(ops):
    lines = ["## NVIDIA GPU Operator chart", "",
             "`gpu_operator_chart_version` must fall in one of these series; the role builds values for that series and",
             "refuses a value key the series does not have.", ""]
    rows = []
    for series in sorted(ops.GPU_OPERATOR_CHARTS, key=_series_key):
        chart = ops.GPU_OPERATOR_CHARTS[series]
        rows.append(["`%s`" % series, "`%s`" % chart["pinned"], chart["driver_version"], "`driver.%s`" % chart["kernel_module_key"],
                     "on" if chart["cdi_default"] else "off"])
    lines += _table(["series", "pinned release", "default driver", "kernel module key", "CDI by default"], rows)
    lines += ["", "Value keys that exist only in some series:", ""]
    lines += ["- `%s`: %s" % (key, ops.KEY_HISTORY[key]) for key in sorted(ops.KEY_HISTORY)]
    lines += ["", "`driver.kernelModuleType: auto` needs a driver container of R%s or newer." % _driver(ops.KERNEL_MODULE_AUTO_MIN_DRIVER)]
    return lines


def _network_operator(net):
    lines = ["## NVIDIA Network Operator chart", "",
             "`network_operator_chart_version` must fall in one of these series; the chart's `kubeVersion` is the",
             "Kubernetes floor helm applies.", ""]
    rows = []
    for series in sorted(net.NETWORK_OPERATOR_CHARTS, key=_series_key):
        chart = net.NETWORK_OPERATOR_CHARTS[series]
        rows.append(["`%s`" % series, "`%s`" % chart["pinned"], ", ".join(chart["ipam"]), chart["default_ipam"],
                     "`%s`" % chart["kube_version"], ("`%s`" % chart["doca_driver"]) if chart["doca_driver"] else "-"])
    lines += _table(["series", "pinned release", "IPAM plugins", "default IPAM", "kubeVersion", "DOCA driver"], rows)
    return lines


def _rdma(rdma):
    lines = ["## Bare-metal GPUDirect RDMA: DMA-BUF or nvidia-peermem", "",
             "`gpudirect_rdma_mode` (and `gpu_operator_rdma.mode: auto`) picks DMA-BUF when every gate holds, else",
             "nvidia-peermem, else neither.", ""]
    rows = [
        ["Linux kernel", ">= %s" % _dotted(rdma.DMABUF_MIN_KERNEL), "any"],
        ["CUDA (driver-provided)", ">= %s" % _dotted(rdma.DMABUF_MIN_CUDA), "any"],
        ["NVIDIA driver", ">= %s" % _driver(rdma.DMABUF_MIN_DRIVER), "any"],
        ["NVIDIA kernel modules", "open", "open or proprietary"],
        ["GPU", "data-center, compute capability >= %s (Turing or newer; PCI device >= 10de:%04x)" % (
            _dotted(rdma.DMABUF_MIN_COMPUTE_CAPABILITY), rdma.TURING_MIN_PCI_DEVICE), "any NVIDIA GPU"],
        ["OFED", "not needed", "MOFED or DOCA-OFED"],
        ["RDMA device", "needed", "needed"],
    ]
    lines += _table(["gate", "DMA-BUF", "nvidia-peermem"], rows)
    return lines


def _mig(mig):
    lines = ["## MIG: minimum driver branch per profile", "",
             "Profiles not listed here work with every driver that supports MIG on the GPU.", ""]
    rows = []
    for model in mig.MODEL_NAMES:
        for name, profile in sorted(mig.CATALOG[model]["profiles"].items()):
            if profile["min_driver_branch"]:
                rows.append(["`%s`" % model, "`%s`" % name, "R%s" % profile["min_driver_branch"]])
    lines += _table(["GPU model", "profile", "minimum driver branch"], rows)
    return lines


def _device_plugin(plugin):
    return ["## NVIDIA device plugin chart", "",
            "The `nvidia_device_plugin` role installs chart `%s` `%s` from %s unless told otherwise." % (
                plugin.DEVICE_PLUGIN_CHART, plugin.DEVICE_PLUGIN_PINNED, plugin.DEVICE_PLUGIN_REPO_URL)]


def render():
    """The text of docs/version-floors.md."""
    cat = _catalogs()
    lines = ["# Version floors", "",
             "<!-- Generated by scripts/gen_version_floors.py from plugins/module_utils/_catalog/; do not edit by hand:",
             "     change the catalog, then run `python3 scripts/gen_version_floors.py`. -->", "",
             "Every version a user must choose against, read from the catalog the modules and roles enforce",
             "([facts.md](facts.md) names each table and its source).", ""]
    for part in (_gke(cat["gke_gpudirect"]), _gpu_operator(cat["gpu_operator"]), _network_operator(cat["network_operator"]),
                 _rdma(cat["gpudirect_rdma"]), _mig(cat["mig"]), _device_plugin(cat["device_plugin"])):
        lines += part + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv):
    text = render()
    if "--check" in argv:
        with open(OUTPUT, encoding="utf-8") as handle:
            if handle.read() != text:
                sys.stderr.write("docs/version-floors.md is out of date: run python3 scripts/gen_version_floors.py\n")
                return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
