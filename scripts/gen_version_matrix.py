# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render every catalog chart version x the main feature combinations and check the result against upstream.

    python3 scripts/gen_version_matrix.py           # rewrite docs/version-matrix.md
    python3 scripts/gen_version_matrix.py --check   # exit 1 when the committed file differs

Each case goes through the real plan filters (gpu_operator_plan, network_operator_plan, mig_device_plugin_config)
and its output is checked against the upstream facts of that version in tests/data/upstream (written by
scripts/extract_upstream.py from the upstream repositories at their tags):

- every rendered chart value key exists in that version's chart (values.yaml or a ``.Values`` path its templates read;
  below a key whose upstream value is a map or list, anything goes: the chart passes it through);
- every custom resource validates against that version's CRD schema, with unknown fields refused (the API server
  drops them in silence: a structural schema prunes what it does not declare);
- every image of a rendered resource is the one in that version's release data;
- every device-plugin config (time-slicing / MPS sharing) matches the config format of the plugin that reads it;
- every value key the catalog accepts for the version exists upstream.

A case may also be refused by the plan (its input error is the result); a refusal is only right where the case says
when upstream makes it one (``refused_when``). tests/unit/test_upstream_version_matrix.py runs each case and compares
the committed doc with ``render()``.
"""

from __future__ import annotations

import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "upstream")
OUTPUT = os.path.join(ROOT, "docs", "version-matrix.md")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import gen_version_floors  # noqa: E402  (makes the collection importable from a plain checkout)

gen_version_floors._catalogs()

import jsonschema  # noqa: E402

from ansible_collections.gpu_ops.cluster.plugins.filter import mig as mig_filters  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.filter import nvidia_operators  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import device_plugin  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpu_operator  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import network_operator  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_plan  # noqa: E402
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import network_operator_plan  # noqa: E402
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host  # noqa: E402

# NVIDIA's staging registry is not public: the images a release file names there are published under the same
# path in nvcr.io/nvidia (Network Operator 25.4.0 and 25.7.0 hack/release.yaml name the doca-driver in
# nvcr.io/nvstaging/mellanox; from 25.10.0 the release file names nvcr.io/nvidia/mellanox itself).
PUBLISHED_REGISTRY = {"nvcr.io/nvstaging/mellanox": "nvcr.io/nvidia/mellanox"}
# NicClusterPolicy spec key -> the component's name in hack/release.yaml.
NCP_RELEASE_NAMES = {"ofedDriver": "Mofed", "rdmaSharedDevicePlugin": "RdmaSharedDevicePlugin", "multus": "Multus",
                     "cniPlugins": "CniPlugins", "ipoib": "Ipoib", "ipamPlugin": "IpamPlugin", "nvIpam": "nvIpam"}


def _load(*parts):
    with open(os.path.join(DATA, *parts), encoding="utf-8") as handle:
        return json.load(handle)


def upstream_tag(chart, series):
    if chart == "gpu-operator":
        return gpu_operator.GPU_OPERATOR_CHARTS[series]["pinned"]
    return "v" + network_operator.NETWORK_OPERATOR_CHARTS[series]["pinned"]


# --- checks ---------------------------------------------------------------------------------------------------

def _leaf_paths(values, prefix=""):
    for key, value in (values or {}).items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        if isinstance(value, dict) and value:
            yield from _leaf_paths(value, path)
        else:
            yield path


def key_problems(project, tag, values, leaves=True):
    """Rendered value keys (leaf paths, or the given dotted keys) that the chart at ``tag`` does not have."""
    data = _load(project, tag, "values.json")
    keys, refs = set(data["keys"]), set(data["template_refs"])
    known = keys | refs
    problems = []
    for path in (_leaf_paths(values) if leaves else values):
        parts = path.split(".")
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts))]
        passthrough = any(p in keys and not any(k.startswith(p + ".") for k in keys) for p in prefixes)
        if path not in known and not passthrough:
            problems.append("value %s is not in %s's chart (%s)" % (path, tag, data["source"]["path"]))
    return problems


def _strict(schema):
    """A Kubernetes structural schema as a JSON schema that refuses fields it does not declare."""
    if not isinstance(schema, dict):
        return schema
    if schema.get("x-kubernetes-int-or-string"):
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    result = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties"):
            result[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            result[key] = _strict(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            result[key] = [_strict(sub) for sub in value]
        elif not key.startswith("x-kubernetes-") and key != "nullable":
            result[key] = value
    if schema.get("nullable") and "type" in result:
        result["type"] = [result["type"], "null"]
    if schema.get("type") == "object" and "additionalProperties" not in schema \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        result["additionalProperties"] = False
    return result


def cr_problems(project, tag, document):
    """Why ``document`` does not validate against its kind's CRD at ``tag`` (unknown fields refused)."""
    kind = document.get("kind")
    path = os.path.join(DATA, project, tag, "crd-%s.json" % kind)
    if not os.path.exists(path):
        return ["no CRD data for %s at %s" % (kind, tag)]
    crd = _load(project, tag, "crd-%s.json" % kind)
    schema = _strict(crd["schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    problems = []
    if document.get("apiVersion") != "%s/%s" % (crd["group"], crd["version"]):
        problems.append("%s apiVersion %s is not %s/%s" % (kind, document.get("apiVersion"), crd["group"], crd["version"]))
    for error in sorted(jsonschema.Draft7Validator(schema).iter_errors(document), key=lambda e: list(e.path)):
        problems.append("%s %s: %s (%s CRD at %s)" % (kind, ".".join(str(p) for p in error.path) or "(root)",
                                                      error.message, kind, tag))
    return problems


def config_problems(plugin_tag, config):
    """Why a device-plugin config does not match the config format of k8s-device-plugin ``plugin_tag``."""
    data = _load("k8s-device-plugin", plugin_tag, "config-schema.json")
    return ["device-plugin config %s: %s (k8s-device-plugin %s %s)" % (
        ".".join(str(p) for p in error.path) or "(root)", error.message, plugin_tag, data["source"]["path"])
        for error in jsonschema.Draft7Validator(data["schema"]).iter_errors(config)]


def _image_problems(what, rendered, upstream, tag, source):
    upstream = dict(upstream, repository=PUBLISHED_REGISTRY.get(upstream["repository"], upstream["repository"]))
    wrong = ["%s %r (upstream %r)" % (k, rendered.get(k), upstream[k]) for k in ("repository", "image", "version")
             if rendered.get(k) != upstream[k]]
    return ["%s image differs from %s %s: %s" % (what, tag, source, ", ".join(wrong))] if wrong else []


# --- the GPU Operator -----------------------------------------------------------------------------------------

def _mig_config():
    return {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}],
                                             "all-1g": [{"devices": "all", "mig-enabled": True,
                                                         "mig-devices": {"1g.10gb": 7}}]}}


def _pools(module_types):
    pools = []
    for index, module in enumerate(module_types):
        pool = {"name": "pool-%d" % index, "node_selector": {"pool": "p%d" % index}}
        if module:
            pool["kernel_module_type"] = module
        pools.append(pool)
    pools[0].update(rdma={"enabled": True, "useHostMofed": True}, gds={"enabled": True})
    return pools


def _crd_has(project, tag, kind, *path):
    schema = _load(project, tag, "crd-%s.json" % kind)["schema"]
    for part in path:
        schema = (schema.get("properties") or {}).get(part)
        if schema is None:
            return False
    return True


def _no_kernel_module_type(tag):
    return not _crd_has("gpu-operator", tag, "NVIDIADriver", "spec", "kernelModuleType")


GPU_CASES = [
    # name, options, hosts, refused_when(tag) or None
    ("defaults", {}, {}, None),
    ("rdma dma-buf + GDS", {"rdma": {"mode": "dmabuf"}, "gds": True, "gdrcopy": True},
     {"a": gpu_host(), "b": gpu_host()}, None),
    ("rdma peermem", {"rdma": {"mode": "peermem", "use_host_mofed": False}},
     {"a": gpu_host(mode="peermem"), "b": gpu_host(mode="peermem")}, None),
    ("MIG mixed + config", {"mig": {"strategy": "mixed", "config": _mig_config()}}, {}, None),
    ("time-slicing", {"device_plugin": {"sharing": {"strategy": "time-slicing", "replicas": 4,
                                                    "fail_requests_greater_than_one": True}}}, {}, None),
    ("MIG single + time-slicing", {"mig": {"strategy": "single"},
                                   "device_plugin": {"sharing": {"strategy": "time-slicing", "replicas": 2}}}, {}, None),
    ("MPS", {"mig": {"strategy": "none"}, "device_plugin": {"sharing": {"strategy": "mps", "replicas": 4}}}, {}, None),
    ("driver pools open/proprietary", {"driver_pools": _pools(["open", "proprietary", None])}, {}, None),
    ("driver pools + chart kernel modules", {"driver": {"kernel_module_type": "open"},
                                             "driver_pools": _pools([None, "proprietary"])}, {}, None),
    ("driver pool auto modules", {"driver_pools": _pools(["auto"])}, {}, _no_kernel_module_type),
    ("GKE", {"platform": "gke", "gke_version": "1.33.2-gke.1111000"}, {}, None),
    ("AKS preinstalled driver", {"platform": "aks"}, {}, None),
    ("OpenShift", {"platform": "openshift"}, {}, None),
]


def gpu_case(series, name, options, hosts):
    """(plan or None, refusal or None, problems) of one GPU Operator case on catalog ``series``."""
    tag = upstream_tag("gpu-operator", series)
    options = dict(copy.deepcopy(options), chart_version=series)
    try:
        plan = nvidia_operators.gpu_operator_plan(options, copy.deepcopy(hosts))
    except Exception as exc:  # the filter's error: a refusal
        return None, str(exc), []
    values = plan["chart"]["values"]
    problems = key_problems("gpu-operator", tag, values)
    images = _load("gpu-operator", tag, "images.json")
    plugin_tag = images["images"]["devicePlugin"]["version"]
    for config_text in ((values.get("devicePlugin") or {}).get("config") or {}).get("data", {}).values():
        problems.extend(config_problems(plugin_tag, json.loads(config_text)))
    for document in plan["objects"]:
        if document["kind"] == "NVIDIADriver":
            problems.extend(cr_problems("gpu-operator", tag, document))
            problems.extend(_image_problems("NVIDIADriver %s driver" % document["metadata"]["name"], document["spec"],
                                            images["images"]["driver"], tag, images["source"]["path"]))
    return plan, None, problems


# --- the Network Operator -------------------------------------------------------------------------------------

def _networks(ipam):
    address = {"ip_pool": "pool-a"} if ipam == "nv-ipam" else {"range": "192.168.10.0/24"}
    return [dict(address, kind="macvlan", name="macvlan-a", master="ens1f0", mtu=9000),
            dict(address, kind="hostdevice", name="hostdev-a", resource_name="hostdev"),
            dict(address, kind="ipoib", name="ipoib-a", master="ibs1")]


def _whereabouts_gone(tag):
    return not _crd_has("network-operator", tag, "NicClusterPolicy", "spec", "secondaryNetwork", "ipamPlugin")


NETWORK_CASES = [
    ("defaults (host OFED)", {}, None),
    ("DOCA driver container", {"ofed": {"source": "operator"}}, None),
    ("nv-ipam pools + networks", {"ipam": "nv-ipam", "ip_pools": [{"name": "pool-a", "subnet": "192.168.10.0/24",
                                                                   "gateway": "192.168.10.1"}],
                                  "networks": _networks("nv-ipam")}, None),
    ("Whereabouts + networks", {"ipam": "whereabouts", "networks": _networks("whereabouts")}, _whereabouts_gone),
    ("SR-IOV operator, no RDMA plugin", {"sriov_network_operator": True,
                                         "rdma_shared_device_plugin": {"enabled": False}}, None),
]


def network_case(series, name, options):
    tag = upstream_tag("network-operator", series)
    options = dict(copy.deepcopy(options), chart_version=series)
    hosts = {"a": gpu_host(), "b": gpu_host()}
    try:
        plan = nvidia_operators.network_operator_plan(options, hosts)
    except Exception as exc:
        return None, str(exc), []
    problems = key_problems("network-operator", tag, plan["chart"]["values"])
    release = _load("network-operator", tag, "images.json")
    policy = plan["nic_cluster_policy"]
    for document in [policy] + plan["ip_pools"] + plan["networks"]:
        problems.extend(cr_problems("network-operator", tag, document))
    components = dict(policy["spec"], **policy["spec"].get("secondaryNetwork", {}))
    for key, component in sorted(components.items()):
        if key in NCP_RELEASE_NAMES:
            problems.extend(_image_problems("NicClusterPolicy %s" % key, component,
                                            release["images"][NCP_RELEASE_NAMES[key]], tag, release["source"]["path"]))
    return plan, None, problems


# --- the device plugin role's config ---------------------------------------------------------------------------

PLUGIN_CASES = [
    ("%s MIG, %s" % (mig, sharing), mig, sharing)
    for mig in ("none", "single", "mixed") for sharing in ("none", "time-slicing", "mps")
]


def plugin_case(mig, sharing):
    tag = "v" + device_plugin.DEVICE_PLUGIN_PINNED
    settings = None if sharing == "none" else {"strategy": sharing, "replicas": 4, "rename_by_default": True}
    resources = {"nvidia.com/mig-1g.10gb": 7} if mig == "mixed" else None
    try:
        config = mig_filters.mig_device_plugin_config(mig, settings, resources)
    except Exception as exc:
        return None, str(exc), []
    return config, None, config_problems(tag, config)


def plugin_role_values():
    """The chart value keys the nvidia_device_plugin role writes (its install tasks' value dicts), as rendered."""
    import yaml
    with open(os.path.join(ROOT, "roles", "nvidia_device_plugin", "tasks", "_install.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    values = {}
    for task in tasks:
        values.update((task.get("vars") or {}).get("__nvidia_device_plugin_base_values") or {})
        values.update((task.get("ansible.builtin.set_fact") or {}).get("__nvidia_device_plugin_config_values") or {})
    return values


def _mps_on_mig(mig, sharing):
    # the plugin runs no MPS server for MIG devices (k8s-device-plugin README, "With CUDA MPS")
    return sharing == "mps" and mig != "none"


# --- the matrix -----------------------------------------------------------------------------------------------

def catalog_key_problems():
    """{(chart, series): problems} for the value keys each catalog version accepts."""
    result = {}
    for series in gpu_operator.GPU_OPERATOR_CHARTS:
        keys = gpu_operator_plan.gpu_operator_keys(series)
        result[("gpu-operator", series)] = key_problems("gpu-operator", upstream_tag("gpu-operator", series),
                                                        sorted(keys), leaves=False)
    for series in network_operator.NETWORK_OPERATOR_CHARTS:
        keys = network_operator_plan.network_operator_keys(series)
        result[("network-operator", series)] = key_problems("network-operator", upstream_tag("network-operator", series),
                                                            sorted(keys), leaves=False)
    return result


def results():
    """Every case: dict(chart, series, tag, case, outcome ok|refused|FAIL, detail, problems)."""
    rows = []

    def row(chart, series, tag, case, outcome, problems, refused_when):
        _plan, refusal, found = outcome
        expected_refusal = bool(refused_when and refused_when())
        if refusal is not None:
            status = "refused" if expected_refusal else "FAIL"
            problems = [] if expected_refusal else ["refused, and upstream %s does not explain it: %s" % (tag, refusal)]
            detail = refusal
        elif expected_refusal:
            status, detail = "FAIL", ""
            problems = found + ["accepted, but upstream %s cannot take it" % tag]
        else:
            status, detail, problems = ("FAIL" if found else "ok"), "", found
        rows.append({"chart": chart, "series": series, "tag": tag, "case": case, "outcome": status,
                     "detail": detail, "problems": problems})

    for (chart, series), problems in catalog_key_problems().items():
        rows.append({"chart": chart, "series": series, "tag": upstream_tag(chart, series), "case": "catalog value keys",
                     "outcome": "FAIL" if problems else "ok", "detail": "", "problems": problems})
    for series in gpu_operator.GPU_OPERATOR_CHARTS:
        tag = upstream_tag("gpu-operator", series)
        for name, options, hosts, refused_when in GPU_CASES:
            row("gpu-operator", series, tag, name, gpu_case(series, name, options, hosts), None,
                refused_when and (lambda f=refused_when, t=tag: f(t)))
    for series in network_operator.NETWORK_OPERATOR_CHARTS:
        tag = upstream_tag("network-operator", series)
        for name, options, refused_when in NETWORK_CASES:
            row("network-operator", series, tag, name, network_case(series, name, options), None,
                refused_when and (lambda f=refused_when, t=tag: f(t)))
    tag = "v" + device_plugin.DEVICE_PLUGIN_PINNED
    role_values = plugin_role_values()
    problems = key_problems("k8s-device-plugin", tag, role_values) if role_values else ["no chart values found in the role"]
    rows.append({"chart": "k8s-device-plugin", "series": tag.lstrip("v"), "tag": tag, "case": "role chart value keys",
                 "outcome": "FAIL" if problems else "ok", "detail": "", "problems": problems})
    for name, mig, sharing in PLUGIN_CASES:
        row("k8s-device-plugin", tag.lstrip("v"), tag, name, plugin_case(mig, sharing), None,
            lambda m=mig, s=sharing: _mps_on_mig(m, s))
    return rows


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _h in headers) + " |"]
    lines.extend("| " + " | ".join(str(c) for c in r) + " |" for r in rows)
    return lines


def render(rows=None):
    rows = results() if rows is None else rows
    lines = ["# Version matrix", "",
             "Generated by `scripts/gen_version_matrix.py` (do not edit; `tests/unit/test_upstream_version_matrix.py` "
             "fails when it is stale). Every chart version the catalogs offer, rendered with the main feature "
             "combinations through the plan filters, and checked against that version's upstream chart: value keys, "
             "custom resources against the CRD schema with unknown fields refused, images against the release data, "
             "and the device plugin's sharing config against the plugin's config format. The upstream facts are "
             "`tests/data/upstream/<project>/<tag>/` (repository, tag, commit and path recorded in each file; "
             "`scripts/extract_upstream.py` writes them).", "",
             "`ok`: rendered and checked; `refused`: the plan refuses the combination for that version, as upstream "
             "explains (the reason is below the table).", ""]
    for chart in ("gpu-operator", "network-operator", "k8s-device-plugin"):
        chart_rows = [r for r in rows if r["chart"] == chart]
        columns = []
        for r in chart_rows:
            if r["series"] not in columns:
                columns.append(r["series"])
        cases = []
        for r in chart_rows:
            if r["case"] not in cases:
                cases.append(r["case"])
        by = {(r["case"], r["series"]): r for r in chart_rows}
        tags = {r["series"]: r["tag"] for r in chart_rows}
        lines += ["## %s" % chart, ""]
        lines += _table(["combination"] + ["%s (`%s`)" % (c, tags[c]) for c in columns],
                        [[case] + [by[(case, c)]["outcome"] if (case, c) in by else "-" for c in columns]
                         for case in cases])
        refusals = [r for r in chart_rows if r["outcome"] == "refused"]
        if refusals:
            lines += ["", "Refusals:", ""]
            lines += ["- %s, %s: %s" % (r["series"], r["case"], r["detail"].replace("|", "/")) for r in refusals]
        lines.append("")
    return "\n".join(lines)


def main(argv):
    text = render()
    if "--check" in argv:
        with open(OUTPUT, encoding="utf-8") as handle:
            return 0 if handle.read() == text else 1
    with open(OUTPUT, "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
