# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Extract the per-version upstream facts the version matrix test checks the catalogs against.

    python3 scripts/extract_upstream.py --gpu-operator DIR --network-operator DIR --device-plugin DIR [--dra-driver DIR]

Each DIR is a git directory (bare is fine) of NVIDIA/gpu-operator, Mellanox/network-operator and
NVIDIA/k8s-device-plugin holding the release tags. For every chart version the catalogs pin it writes, under
tests/data/upstream/<project>/<tag>/, compact JSON files that each record their source (repository, tag,
commit, path):

- ``values.json``: every dotted key of the chart's values.yaml and every ``.Values`` path its templates read;
- ``crd-<Kind>.json``: the openAPIV3Schema of each custom resource the roles create (storage version);
- ``images.json``: the release's image data (Network Operator ``hack/release.yaml``; GPU Operator the
  values.yaml ``driver`` image);
- ``config-schema.json`` (k8s-device-plugin, at the catalog's pin and at the plugin version each GPU Operator
  chart deploys): a JSON schema of the plugin's config file, derived from the
  Go structs of ``api/config/v1`` (json tags, embedded structs inlined, the required fields and minimums its
  UnmarshalJSON methods enforce).

Nothing here is read at run time; the data is committed and tests/unit/test_upstream_version_matrix.py reads it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "upstream")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

REPOS = {"gpu-operator": "NVIDIA/gpu-operator", "network-operator": "Mellanox/network-operator",
         "k8s-device-plugin": "NVIDIA/k8s-device-plugin", "dra-driver-nvidia-gpu": "kubernetes-sigs/dra-driver-nvidia-gpu"}
GPU_OPERATOR_CHART = "deployments/gpu-operator"
NETWORK_OPERATOR_CHART = "deployment/network-operator"
DEVICE_PLUGIN_CHART = "deployments/helm/nvidia-device-plugin"
# Custom resources the roles create, and where each CRD sits at a tag (the first path that exists).
GPU_OPERATOR_CRDS = {"NVIDIADriver": [GPU_OPERATOR_CHART + "/crds/nvidia.com_nvidiadrivers.yaml",
                                      "config/crd/bases/nvidia.com_nvidiadrivers.yaml"]}
NETWORK_OPERATOR_CRDS = {
    "NicClusterPolicy": [NETWORK_OPERATOR_CHART + "/crds/mellanox.com_nicclusterpolicies.yaml"],
    "MacvlanNetwork": [NETWORK_OPERATOR_CHART + "/crds/mellanox.com_macvlannetworks.yaml"],
    "HostDeviceNetwork": [NETWORK_OPERATOR_CHART + "/crds/mellanox.com_hostdevicenetworks.yaml"],
    "IPoIBNetwork": [NETWORK_OPERATOR_CHART + "/crds/mellanox.com_ipoibnetworks.yaml"],
    "IPPool": ["manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml"],
}


def _git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), check=True, capture_output=True, text=True).stdout


def _source(project, repo, tag, path):
    return {"repository": REPOS[project], "tag": tag, "commit": _git(repo, "rev-parse", tag + "^{commit}").strip(),
            "path": path}


def _write(project, tag, name, document):
    folder = os.path.join(OUT, project, tag)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1, sort_keys=True)
        handle.write("\n")


def _dotted(values, prefix=""):
    keys = []
    for key, value in (values or {}).items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        keys.append(path)
        if isinstance(value, dict):
            keys.extend(_dotted(value, path))
    return keys


_VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_INDEX_REF = re.compile(r"index\s+\.Values((?:\s+\"[^\"]+\")+)")


def _template_refs(repo, tag, chart):
    refs = set()
    for path in _git(repo, "ls-tree", "-r", "--name-only", tag, chart + "/templates/").split():
        text = _git(repo, "show", "%s:%s" % (tag, path))
        refs.update(match.group(1)[1:] for match in _VALUES_REF.finditer(text))
        refs.update(".".join(re.findall(r"\"([^\"]+)\"", match.group(1))) for match in _INDEX_REF.finditer(text))
    return sorted(refs)


def _values(project, repo, tag, chart):
    path = chart + "/values.yaml"
    values = yaml.safe_load(_git(repo, "show", "%s:%s" % (tag, path)))
    document = {"source": _source(project, repo, tag, path), "keys": sorted(set(_dotted(values))),
                "template_refs": _template_refs(repo, tag, chart),
                "template_source": _source(project, repo, tag, chart + "/templates/")}
    _write(project, tag, "values.json", document)
    return values


def _bare(schema):
    """The schema without its descriptions (they are prose, and most of the bytes)."""
    if isinstance(schema, dict):
        return {k: _bare(v) for k, v in schema.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema


def _crds(project, repo, tag, table):
    existing = set(_git(repo, "ls-tree", "-r", "--name-only", tag).split())
    for kind, paths in table.items():
        path = next((p for p in paths if p in existing), None)
        if path is None:
            raise SystemExit("%s %s: no CRD for %s at %s" % (project, tag, kind, ", ".join(paths)))
        crd = next(d for d in yaml.safe_load_all(_git(repo, "show", "%s:%s" % (tag, path)))
                   if d and d.get("kind") == "CustomResourceDefinition")
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        _write(project, tag, "crd-%s.json" % kind, {
            "source": _source(project, repo, tag, path), "group": crd["spec"]["group"], "version": version["name"],
            "kind": crd["spec"]["names"]["kind"], "schema": _bare(version["schema"]["openAPIV3Schema"])})


# --- Go structs of k8s-device-plugin api/config/v1 -> JSON schema ------------------------------------------------

_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_ALIAS = re.compile(r"^type (\w+) (\[\]\w+|\w+)\s*$", re.M)
_FIELD = re.compile(r"^\s*(\w+)\s+([\w\[\]\*\.]+)\s+`json:\"([^\",]*)(,omitempty)?\"")
_EMBEDDED = re.compile(r"^\s*(\*?[A-Z]\w*)\s*(?://.*)?$")
_UNMARSHAL = re.compile(r"^func \(\w+ \*?(\w+)\) UnmarshalJSON\(\w+ \[\]byte\) error \{\n(.*?)^\}", re.M | re.S)
_REQUIRED = re.compile(r"\w+, exists := \w+\[\"(\w+)\"\]\n\s*if !exists \{\n\s*return fmt\.Errorf")
_MINIMUM = re.compile(r"if \w+\.(\w+) < (\d+) \{\n\s*return fmt\.Errorf")
_GO_TYPES = {"string": {"type": "string"}, "bool": {"type": "boolean"}, "int": {"type": "integer"},
             "uint": {"type": "integer", "minimum": 0}, "uint64": {"type": "integer", "minimum": 0}}


def _go_schema(sources):
    text = "\n".join(sources.values())
    structs = dict(_STRUCT.findall(text))
    aliases = dict(_ALIAS.findall(text))
    unmarshal = dict(_UNMARSHAL.findall(text))

    def of_type(go_type):
        go_type = go_type.lstrip("*")
        if go_type.startswith("[]"):
            return {"type": "array", "items": of_type(go_type[2:])}
        if go_type in _GO_TYPES:
            return dict(_GO_TYPES[go_type])
        # a struct decoded field by field (its UnmarshalJSON, if any, reads a map of its json names)
        if go_type in structs and ("map[string]json.RawMessage" in unmarshal.get(go_type, "map[string]json.RawMessage")):
            return {"$ref": "#/definitions/%s" % go_type}
        if go_type in aliases and go_type not in unmarshal:
            return of_type(aliases[go_type])
        return {}  # a type with its own decoding (a union such as ReplicatedDevices, a Duration): not constrained

    definitions = {}

    def define(name):
        if name in definitions:
            return
        definitions[name] = None
        properties, go_names = {}, {}
        for line in structs[name].splitlines():
            field = _FIELD.match(line)
            if field:
                go_name, go_type, json_name = field.group(1), field.group(2), field.group(3)
                if json_name == "-":
                    continue
                properties[json_name] = of_type(go_type)
                go_names[go_name] = json_name
                inner = go_type.lstrip("*[]")
                if inner in structs:
                    define(inner)
                continue
            embedded = _EMBEDDED.match(line)
            if embedded and embedded.group(1).lstrip("*") in structs:
                inner = embedded.group(1).lstrip("*")
                define(inner)
                properties.update(definitions[inner]["properties"])
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        body = unmarshal.get(name, "")
        required = sorted(set(_REQUIRED.findall(body)) & set(properties))
        if required:
            schema["required"] = required
        for go_name, minimum in _MINIMUM.findall(body):
            if go_name in go_names:
                schema["properties"][go_names[go_name]] = dict(schema["properties"][go_names[go_name]], minimum=int(minimum))
        definitions[name] = schema

    define("Config")
    root = dict(definitions.pop("Config"))
    root["definitions"] = dict(definitions)
    return root


def _device_plugin(repo, tag, chart=True):
    folder = "api/config/v1"
    paths = [p for p in _git(repo, "ls-tree", "-r", "--name-only", tag, folder + "/").split()
             if p.endswith(".go") and not p.endswith("_test.go")]
    sources = {p: _git(repo, "show", "%s:%s" % (tag, p)) for p in paths}
    _write("k8s-device-plugin", tag, "config-schema.json", {
        "source": _source("k8s-device-plugin", repo, tag, folder + "/"),
        "files": sorted(paths), "schema": _go_schema(sources)})
    if chart:
        _values("k8s-device-plugin", repo, tag, DEVICE_PLUGIN_CHART)


def _dra_driver(repo):
    """The NVIDIA DRA driver at each tag the catalog names (both chart lines live in one repository): Chart.yaml,
    the values keys, the CRDs of crds/ and which DeviceClass templates exist (written under the catalog version)."""
    catalog = _catalog("dra_driver")
    for line, entry in catalog.CHARTS.items():
        chart = "deployments/helm/" + line
        for version in entry["versions"]:
            tag, commit = catalog.CHART_TAGS[version]
            tag = commit if tag == "HEAD" else tag
            meta = yaml.safe_load(_git(repo, "show", "%s:%s/Chart.yaml" % (tag, chart)))
            source = _source("dra-driver-nvidia-gpu", repo, tag, chart + "/Chart.yaml")
            files = _git(repo, "ls-tree", "-r", "--name-only", tag, chart + "/").split()
            crds = {}
            for path in (f for f in files if f.startswith(chart + "/crds/")):
                crd = yaml.safe_load(_git(repo, "show", "%s:%s" % (tag, path)))
                crds[crd["metadata"]["name"]] = {
                    "group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"], "scope": crd["spec"]["scope"],
                    "plural": crd["spec"]["names"]["plural"],
                    "versions": [v["name"] for v in crd["spec"]["versions"] if v.get("served")]}
            classes = {}
            for path in (f for f in files if "/templates/deviceclass-" in f):
                text = _git(repo, "show", "%s:%s" % (tag, path))
                classes[re.search(r"^  name: (\S+)", text, re.M).group(1)] = text.splitlines()[
                    next(i for i, line in enumerate(text.splitlines()) if line.startswith("{{"))]
            document = {"source": source, "name": meta["name"], "version": meta["version"],
                        "kubeVersion": meta.get("kubeVersion"), "crds": crds, "device_classes": classes}
            _write("dra-driver-nvidia-gpu", version, "chart.json", document)
            _values("dra-driver-nvidia-gpu", repo, tag, chart)
            values_file = os.path.join(OUT, "dra-driver-nvidia-gpu", tag, "values.json")
            os.replace(values_file, os.path.join(OUT, "dra-driver-nvidia-gpu", version, "values.json"))
            if tag != version:
                os.rmdir(os.path.dirname(values_file))


def _catalog(name):
    try:
        return importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog." + name)
    except ImportError:
        import gen_version_floors  # noqa: F401 - it makes the collection importable from a plain checkout
        gen_version_floors._catalogs()
        return importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog." + name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-operator", required=True)
    parser.add_argument("--network-operator", required=True)
    parser.add_argument("--device-plugin", required=True)
    parser.add_argument("--dra-driver", help="kubernetes-sigs/dra-driver-nvidia-gpu (its tags and the NVIDIA/k8s-dra-driver-gpu ones)")
    args = parser.parse_args(argv)
    if args.dra_driver:
        _dra_driver(args.dra_driver)
    for entry in _catalog("gpu_operator").GPU_OPERATOR_CHARTS.values():
        tag = entry["pinned"]
        values = _values("gpu-operator", args.gpu_operator, tag, GPU_OPERATOR_CHART)
        _crds("gpu-operator", args.gpu_operator, tag, GPU_OPERATOR_CRDS)
        _write("gpu-operator", tag, "images.json", {
            "source": _source("gpu-operator", args.gpu_operator, tag, GPU_OPERATOR_CHART + "/values.yaml"),
            "images": {name: {k: values[name][k] for k in ("repository", "image", "version")}
                       for name in ("driver", "devicePlugin")}})
        # the device plugin this chart deploys reads the sharing config the GPU Operator role writes
        _device_plugin(args.device_plugin, values["devicePlugin"]["version"], chart=False)
    for entry in _catalog("network_operator").NETWORK_OPERATOR_CHARTS.values():
        tag = "v" + entry["pinned"]
        _values("network-operator", args.network_operator, tag, NETWORK_OPERATOR_CHART)
        _crds("network-operator", args.network_operator, tag, NETWORK_OPERATOR_CRDS)
        release = yaml.safe_load(_git(args.network_operator, "show", "%s:hack/release.yaml" % tag))
        _write("network-operator", tag, "images.json", {
            "source": _source("network-operator", args.network_operator, tag, "hack/release.yaml"),
            "images": {name: {k: image[k] for k in ("image", "repository", "version")} for name, image in release.items()}})
    _device_plugin(args.device_plugin, "v" + _catalog("device_plugin").DEVICE_PLUGIN_PINNED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
