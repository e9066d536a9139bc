# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every catalog chart version x the main feature combinations, checked against that version's upstream chart.

The cases and checks are scripts/gen_version_matrix.py's (it also writes docs/version-matrix.md); the upstream facts
are tests/data/upstream/<project>/<tag>/, extracted by scripts/extract_upstream.py from the upstream repositories at
their tags. The checkers are tested here on their own against hand-written documents, so a checker that passes
everything cannot hide a fault.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import device_plugin, gpu_operator, network_operator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "upstream")


def _script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MATRIX = _script("gen_version_matrix")
ROWS = MATRIX.results()


@pytest.mark.parametrize("row", ROWS, ids=["%s-%s-%s" % (r["chart"], r["series"], r["case"]) for r in ROWS])
def test_each_version_and_combination_matches_upstream(row):
    assert row["outcome"] != "FAIL", "\n".join(row["problems"])


def test_the_committed_doc_is_the_generated_one():
    with open(MATRIX.OUTPUT, encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == MATRIX.render(ROWS), "docs/version-matrix.md is stale: run python3 scripts/gen_version_matrix.py"


def test_the_matrix_covers_every_catalog_version():
    seen = {(r["chart"], r["series"]) for r in ROWS}
    assert {("gpu-operator", s) for s in gpu_operator.GPU_OPERATOR_CHARTS} <= seen
    assert {("network-operator", s) for s in network_operator.NETWORK_OPERATOR_CHARTS} <= seen
    assert ("k8s-device-plugin", device_plugin.DEVICE_PLUGIN_PINNED) in seen


@pytest.mark.parametrize("project,tag,names", [
    ("gpu-operator", "v" + e["pinned"].lstrip("v"), ("values.json", "images.json", "crd-NVIDIADriver.json"))
    for e in gpu_operator.GPU_OPERATOR_CHARTS.values()] + [
    ("network-operator", "v" + e["pinned"], ("values.json", "images.json", "crd-NicClusterPolicy.json", "crd-IPPool.json",
                                             "crd-MacvlanNetwork.json", "crd-HostDeviceNetwork.json", "crd-IPoIBNetwork.json"))
    for e in network_operator.NETWORK_OPERATOR_CHARTS.values()] + [
    ("k8s-device-plugin", "v" + device_plugin.DEVICE_PLUGIN_PINNED, ("values.json", "config-schema.json"))])
def test_each_catalog_version_has_upstream_data_that_names_its_source(project, tag, names):
    repository = {"gpu-operator": "NVIDIA/gpu-operator", "network-operator": "Mellanox/network-operator",
                  "k8s-device-plugin": "NVIDIA/k8s-device-plugin"}[project]
    for name in names:
        with open(os.path.join(DATA, project, tag, name), encoding="utf-8") as handle:
            source = json.load(handle)["source"]
        assert source["repository"] == repository and source["tag"] == tag and source["path"]
        assert len(source["commit"]) == 40


# ---- the checkers on their own ----------------------------------------------------------------------------------

def _driver(**spec):
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "a"},
            "spec": dict({"driverType": "gpu", "image": "driver", "repository": "nvcr.io/nvidia", "version": "1"}, **spec)}


def test_cr_check_refuses_a_field_the_version_crd_lacks():
    assert MATRIX.cr_problems("gpu-operator", "v25.3.4", _driver(kernelModuleType="open")) == []
    problems = MATRIX.cr_problems("gpu-operator", "v24.9.2", _driver(kernelModuleType="open"))
    assert len(problems) == 1 and "'kernelModuleType' was unexpected" in problems[0]
    assert MATRIX.cr_problems("gpu-operator", "v24.9.2", _driver(useOpenKernelModules=True)) == []


def test_cr_check_refuses_unknown_nested_fields_wrong_types_and_api_versions():
    assert any("driverTypo" in p for p in MATRIX.cr_problems("gpu-operator", "v25.10.1", _driver(rdma={"driverTypo": True})))
    assert any("is not of type 'boolean'" in p for p in MATRIX.cr_problems("gpu-operator", "v25.10.1", _driver(usePrecompiled="yes")))
    wrong = dict(_driver(), apiVersion="nvidia.com/v1")
    assert any("apiVersion nvidia.com/v1" in p for p in MATRIX.cr_problems("gpu-operator", "v25.10.1", wrong))
    policy = {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy", "metadata": {"name": "p"},
              "spec": {"secondaryNetwork": {"ipamPlugin": {"image": "whereabouts", "repository": "r", "version": "v"}}}}
    assert MATRIX.cr_problems("network-operator", "v25.7.0", policy) == []
    assert any("ipamPlugin" in p for p in MATRIX.cr_problems("network-operator", "v25.10.0", policy))


def test_key_check_knows_a_key_only_from_its_release():
    assert MATRIX.key_problems("network-operator", "v26.4.1", {"nfd": {"enabled": True}}) == []
    assert MATRIX.key_problems("network-operator", "v26.4.1", {"keepNCP": True}) == [
        "value keepNCP is not in v26.4.1's chart (deployment/network-operator/values.yaml)"]
    # below a map the chart passes through, any key goes; below a walked map, not
    assert MATRIX.key_problems("gpu-operator", "v25.10.1", {"devicePlugin": {"config": {"data": {"any": "x"}}}}) == []
    assert MATRIX.key_problems("gpu-operator", "v25.10.1", {"driver": {"rdma": {"typo": True}}}) != []


def test_config_check_follows_the_plugin_config_format():
    good = {"version": "v1", "flags": {"migStrategy": "none"},
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert MATRIX.config_problems("v0.20.0", good) == []
    bad = json.loads(json.dumps(good))
    bad["sharing"] = {"timeslicing": bad["sharing"]["timeSlicing"]}
    assert any("timeslicing" in p for p in MATRIX.config_problems("v0.20.0", bad))
    one = json.loads(json.dumps(good))
    one["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 1
    assert any("less than the minimum of 2" in p for p in MATRIX.config_problems("v0.20.0", one))
    bare = {"version": "v1", "sharing": {"mps": {"renameByDefault": True}}}
    assert any("'resources' is a required property" in p for p in MATRIX.config_problems("v0.17.0", bare))


def test_image_check_compares_with_the_published_registry():
    upstream = {"image": "doca-driver", "repository": "nvcr.io/nvstaging/mellanox", "version": "25.04-0.6.1.0-2"}
    rendered = {"image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox", "version": "25.04-0.6.1.0-2"}
    assert MATRIX._image_problems("x", rendered, upstream, "v25.4.0", "hack/release.yaml") == []
    assert MATRIX._image_problems("x", dict(rendered, version="network-operator-v25.4.0"), upstream, "v25.4.0",
                                  "hack/release.yaml") != []


def test_go_struct_extraction():
    extract = _script("extract_upstream")
    source = '''
type Config struct {
    Version string `json:"version"        yaml:"version"`
    Flags   Flags  `json:"flags,omitempty" yaml:"flags,omitempty"`
    Items   []Item `json:"items,omitempty" yaml:"items,omitempty"`
}

type Flags struct {
    CommandLineFlags
}

type CommandLineFlags struct {
    Strategy *string `json:"strategy" yaml:"strategy"`
}

type Item struct {
    Name  Name `json:"name" yaml:"name"`
    Count int  `json:"count" yaml:"count"`
}

type Name string

func (s *Item) UnmarshalJSON(b []byte) error {
    rr := make(map[string]json.RawMessage)
    name, exists := rr["name"]
    if !exists {
        return fmt.Errorf("no name")
    }
    if s.Count < 3 {
        return fmt.Errorf("too few")
    }
    return nil
}
'''
    schema = extract._go_schema({"a.go": source})
    assert set(schema["properties"]) == {"version", "flags", "items"} and schema["additionalProperties"] is False
    assert schema["definitions"]["Flags"]["properties"] == {"strategy": {"type": "string"}}
    item = schema["definitions"]["Item"]
    assert item["required"] == ["name"] and item["properties"]["count"] == {"type": "integer", "minimum": 3}
    assert item["properties"]["name"] == {"type": "string"}
