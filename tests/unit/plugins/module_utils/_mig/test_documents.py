# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG documents (plugins/module_utils/_mig/documents.py): mig-parted configs and the device plugin config."""

from __future__ import annotations

import jsonschema
import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import documents as mig_documents
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes


def test_mig_parted_config_keeps_compute_instance_counts():
    config = mig_documents.mig_parted_config("H100-80GB", [{"1c.3g.40gb": 3, "3g.40gb": 1}, {"2c.4g.40gb": 2, "3C.3G.40GB": 1}],
                                             name="split", device_filter=False, include_defaults=False)
    assert config["mig-configs"]["split"] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 3, "3g.40gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"2c.4g.40gb": 2, "3g.40gb": 1}}]
    assert mig_nodes.expected_resources("H100-80GB", 1, {"1c.3g.40gb": 3, "3g.40gb": 1}, "mixed") == {
        "nvidia.com/mig-1c.3g.40gb": 3, "nvidia.com/mig-3g.40gb": 1}


# --------------------------------------------------------------------------------------------
# Config documents
# --------------------------------------------------------------------------------------------

# mig-parted api/spec/v1 rules (nvidia-stack.md 4.1) written as a schema.
_PROFILE_KEY = r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-](me|me\.all|gfx)(,(me|me\.all|gfx))*)?$"
MIG_PARTED_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "mig-configs"],
    "properties": {
        "version": {"const": "v1"},
        "mig-configs": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["devices", "mig-enabled"],
                    "properties": {
                        "devices": {"oneOf": [{"const": "all"},
                                              {"type": "array", "items": {"type": "integer", "minimum": 0}}]},
                        "device-filter": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                        "mig-enabled": {"type": "boolean"},
                        "mig-devices": {"type": "object", "propertyNames": {"pattern": _PROFILE_KEY},
                                        "additionalProperties": {"type": "integer", "minimum": 0}},
                    },
                    "if": {"properties": {"mig-enabled": {"const": False}}},
                    "then": {"not": {"required": ["mig-devices"]}},
                    "else": {"required": ["mig-devices"]},
                },
            },
        },
    },
}


def test_mig_parted_config_one_layout_for_all_gpus():
    config = mig_documents.mig_parted_config("A100-40GB", "all-balanced", name="balanced")
    jsonschema.validate(config, MIG_PARTED_SCHEMA)
    assert config["mig-configs"]["balanced"] == [{
        "devices": "all",
        "device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
        "mig-enabled": True,
        "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    }]
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert config["mig-configs"]["all-enabled"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]


def test_mig_parted_config_per_gpu_groups_identical_layouts():
    layout = [{"3g.20gb": 2}, None, {"3g.20gb": 2}, {"1g.5gb+me": 1, "1g.5gb": 6}]
    config = mig_documents.mig_parted_config("A100-40GB", layout, name="mixed-pool", device_filter=False,
                                             include_defaults=False)
    jsonschema.validate(config, MIG_PARTED_SCHEMA)
    assert config == {"version": "v1", "mig-configs": {"mixed-pool": [
        {"devices": [0, 2], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}},
        {"devices": [1], "mig-enabled": False},
        {"devices": [3], "mig-enabled": True, "mig-devices": {"1g.5gb": 6, "1g.5gb+me": 1}},
    ]}}
    a30 = mig_documents.mig_parted_config("A30", "2g.12gb")
    assert a30["mig-configs"]["custom"][0]["device-filter"] == "0x20B710DE"
    jsonschema.validate(a30, MIG_PARTED_SCHEMA)


def test_mig_parted_config_refuses_bad_input():
    with pytest.raises(ValueError, match="does not fit"):
        mig_documents.mig_parted_config("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1})
    with pytest.raises(ValueError, match="default configs"):
        mig_documents.mig_parted_config("A100-40GB", "1g.5gb", name="all-disabled")
    with pytest.raises(ValueError, match="non-empty string"):
        mig_documents.mig_parted_config("A100-40GB", "1g.5gb", name="")


def test_device_plugin_config():
    assert mig_documents.device_plugin_config("single") == {"version": "v1", "flags": {"migStrategy": "single"}}
    resources = mig_nodes.expected_resources("A100-40GB", 8, "1g.5gb", "mixed")
    config = mig_documents.device_plugin_config("mixed", {"strategy": "time-slicing", "replicas": 2,
                                                          "fail_requests_greater_than_one": True}, resources)
    assert config["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}
    mps = mig_documents.device_plugin_config("none", {"strategy": "mps", "replicas": 4})
    assert mps["sharing"] == {"mps": {"renameByDefault": False,
                                      "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    with pytest.raises(ValueError, match="MPS sharing is not supported for MIG"):
        mig_documents.device_plugin_config("single", {"strategy": "mps", "replicas": 4})


def test_a_mig_parted_config_looks_its_model_up_once(catalog_lookups):
    config = mig_documents.mig_parted_config("A100-SXM4-40GB", ["all-balanced", "3g.20gb"], name="two", device_filter=False)
    assert config["mig-configs"]["two"] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
    assert catalog_lookups == ["A100-SXM4-40GB"]
