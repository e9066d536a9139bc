# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sum up the RDMA demo renders (``make demo-rdma``, ``make demo-rdma-a4x``) as the README's table.

    make demo-rdma demo-rdma-a4x
    python3 scripts/gen_demo_renders.py rendered-rdma rendered-rdma-a4x           # rewrite README's block
    python3 scripts/gen_demo_renders.py --check rendered-rdma rendered-rdma-a4x   # exit 1 when it differs

The block sits between ``<!-- BEGIN RDMA-DEMO-RENDERS -->`` and ``<!-- END RDMA-DEMO-RENDERS -->`` in README.md.
tests/integration/test_demo_renders.py renders both inventories' hosts and compares ``table()`` with that block,
so the numbers a reader sees are the ones the playbook writes today. Only the standard library and PyYAML.
"""

from __future__ import annotations

import collections
import json
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- BEGIN RDMA-DEMO-RENDERS -->"
END = "<!-- END RDMA-DEMO-RENDERS -->"
# (make target, render folder, README column title), in README column order
DEMOS = (("demo-rdma", "rendered-rdma", "A3 Ultra (`make demo-rdma`)"),
         ("demo-rdma-a4x", "rendered-rdma-a4x", "A4X (`make demo-rdma-a4x`)"))


def _requests(folder):
    path = os.path.join(folder, "requests")
    return [json.load(open(os.path.join(path, name), encoding="utf-8")) for name in sorted(os.listdir(path))]


def _manifests(folder):
    steps = collections.OrderedDict()
    base = os.path.join(folder, "manifests")
    for step in sorted(os.listdir(base)):
        objects = []
        for name in sorted(os.listdir(os.path.join(base, step))):
            with open(os.path.join(base, step, name), encoding="utf-8") as handle:
                objects.extend(o for o in yaml.safe_load_all(handle) if o)
        steps[step] = objects
    return steps


def _resource(url):
    """The collection a request addresses: networks, subnetworks, firewalls, clusters, nodePools."""
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def summarize(folder):
    """The facts of one render folder that README's table shows (plain values)."""
    requests = _requests(folder)
    methods = collections.Counter(r["method"] for r in requests)
    resources = collections.Counter(_resource(r["url"]) for r in requests)
    paths = set(r["url"].split("?", 1)[0] for r in requests)
    networks = [r["body"] for r in requests if _resource(r["url"]) == "networks"]
    roce = [n for n in networks if n.get("networkProfile")]
    pool_request = [r for r in requests if _resource(r["url"]) == "nodePools"][-1]
    pool = pool_request["body"]["nodePool"]
    config = pool["config"]
    steps = _manifests(folder)
    kinds = dict((step, collections.Counter(o["kind"] for o in objects)) for step, objects in steps.items())
    modes = collections.Counter(o["spec"]["deviceMode"] for objects in steps.values() for o in objects
                                if o["kind"] == "GKENetworkParamSet")
    installer = [o for objects in steps.values() for o in objects
                 if o["kind"] == "DaemonSet" and "installer" in o["metadata"]["name"]][0]
    template = installer["spec"]["template"]["spec"]
    installer_image = [c["image"] for c in template.get("initContainers", []) if "gib" in c["image"]][0]
    terms = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    arch = [v for term in terms for e in term["matchExpressions"] if e["key"] == "kubernetes.io/arch" for v in e["values"]]
    pods = [o for objects in steps.values() for o in objects if o["kind"] == "Pod"]
    container = pods[0]["spec"]["containers"][0]
    env = dict((e["name"], e.get("value")) for e in container.get("env", []))
    interfaces = json.loads(pods[0]["metadata"]["annotations"]["networking.gke.io/interfaces"])
    releases = []
    charts = os.path.join(folder, "charts")
    for step in sorted(os.listdir(charts)) if os.path.isdir(charts) else []:
        for name in sorted(os.listdir(os.path.join(charts, step))):
            with open(os.path.join(charts, step, name), encoding="utf-8") as handle:
                release = yaml.safe_load(handle)
            releases.append("`%s` %s (`%s`), step `%s`" % (release["release_name"], release["chart_version"],
                                                           release["chart_ref"].rsplit("/", 1)[-1], step))
    return dict(
        releases=releases, requests=len(requests), methods=dict(methods), paths=len(paths), resources=dict(resources),
        mtus=sorted(set(n.get("mtu") for n in networks)),
        network_profile=roce[0]["networkProfile"].rsplit("/", 1)[-1] if roce else None,
        machine_type=config["machineType"],
        accelerators="%s x %s" % (config["accelerators"][0]["acceleratorCount"], config["accelerators"][0]["acceleratorType"]),
        gpudirect_strategy=config.get("gpuDirectConfig", {}).get("gpuDirectStrategy"),
        node_networks=len(pool.get("networkConfig", {}).get("additionalNodeNetworkConfigs", [])),
        disk_type=config.get("diskType"), pool_api=pool_request["url"].split("container.googleapis.com/", 1)[1].split("/", 1)[0],
        steps=[(step, sum(count.values()), dict(count)) for step, count in kinds.items()],
        device_modes=dict(modes), installer=installer["metadata"]["name"], installer_image=installer_image,
        installer_arch=arch, pods=len(pods), pod_gpus=container["resources"]["limits"]["nvidia.com/gpu"],
        pod_interfaces=len(interfaces), nccl_net=env.get("NCCL_NET"), test_image=container["image"])


def _image(ref):
    """us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/x:v1@sha256:abcdef... -> `x:v1@sha256:abcdef12…`"""
    name = ref.rsplit("/", 1)[-1]
    if "@sha256:" in name:
        name, digest = name.split("@sha256:", 1)
        name = "%s@sha256:%s…" % (name, digest[:12])
    return "`%s`" % name


def _counts(mapping):
    return ", ".join("%d %s" % (n, k) for k, n in mapping.items())


def _row(summary):
    s = summary
    return [
        "%d: %s to %d API paths (%s)" % (s["requests"], _counts(s["methods"]), s["paths"], _counts(s["resources"])),
        ", ".join(str(m) for m in s["mtus"]),
        "`%s`" % s["network_profile"] if s["network_profile"] else "none",
        "`%s`, %s, pool through `%s`" % (s["machine_type"], s["accelerators"], s["pool_api"]),
        "`%s`" % s["gpudirect_strategy"] if s["gpudirect_strategy"] else "not sent",
        str(s["node_networks"]),
        "`%s`" % s["disk_type"] if s["disk_type"] else "GKE's default",
        "; ".join("`%s` %d (%s)" % (step, total, _counts(kinds)) for step, total, kinds in s["steps"]),
        _counts(s["device_modes"]),
        "`%s`: %s%s" % (s["installer"], _image(s["installer_image"]),
                        ", arch %s only" % "/".join(s["installer_arch"]) if s["installer_arch"] else ""),
        "%d pods, %d GPUs and %d interfaces each, `NCCL_NET=%s`, %s" % (
            s["pods"], s["pod_gpus"], s["pod_interfaces"], s["nccl_net"], _image(s["test_image"])),
        "; ".join(s["releases"]) or "none",
    ]


ROWS = ("cloud requests", "VPC MTU", "RoCE VPC `networkProfile`", "node pool", "`gpuDirectConfig.gpuDirectStrategy`",
        "additional node networks", "boot disk", "manifest steps (objects)", "GKENetworkParamSet `deviceMode`",
        "gIB installer", "NCCL test", "Helm releases")


def table(summaries):
    """README's markdown table of the summaries (one column per demo, DEMOS order)."""
    columns = [_row(s) for s in summaries]
    lines = ["| | %s |" % " | ".join(title for _target, _folder, title in DEMOS[:len(summaries)]),
             "| --- |%s" % (" --- |" * len(summaries))]
    for index, name in enumerate(ROWS):
        lines.append("| %s | %s |" % (name, " | ".join(column[index] for column in columns)))
    return "\n".join(lines) + "\n"


def readme_block(text):
    """The table between the markers of README's text (None when the markers are missing)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv):
    check = "--check" in argv
    folders = [a for a in argv if a != "--check"] or [folder for _target, folder, _title in DEMOS]
    generated = table([summarize(folder) for folder in folders])
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    current = readme_block(text)
    if current is None:
        sys.stderr.write("README.md has no %s ... %s block\n" % (BEGIN, END))
        return 2
    if check:
        if current != generated:
            sys.stderr.write("README.md's RDMA demo table is stale: run make demo-rdma demo-rdma-a4x and "
                             "python3 scripts/gen_demo_renders.py\n")
            return 1
        return 0
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(README, "w", encoding="utf-8") as handle:
        handle.write(head + BEGIN + "\n" + generated + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
