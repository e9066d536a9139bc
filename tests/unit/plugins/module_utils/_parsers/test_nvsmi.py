# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi parsers (plugins/module_utils/_parsers/nvsmi.py) against the samples in fixtures/nvsmi/."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "nvsmi"
SAMPLES = sorted(FIXTURES.glob("*.txt"))


def _read(path):
    # newline="" keeps CRLF samples as captured
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def test_every_sample_has_an_expectation_and_a_parser():
    assert len(SAMPLES) >= 20
    for sample in SAMPLES:
        assert sample.with_suffix(".json").exists(), sample.name
        assert sample.name.split("--")[0] in _nvsmi.PARSERS, sample.name


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_sample(sample):
    spec = json.loads(sample.with_suffix(".json").read_text())
    parser = _nvsmi.PARSERS[sample.name.split("--")[0]]
    text = _read(sample)
    if "error" in spec:
        with pytest.raises(_nvsmi.NvsmiError) as err:
            parser(text, **spec.get("args", {}))
        assert spec["error"] in str(err.value)
    else:
        assert parser(text, **spec.get("args", {})) == spec["expected"]


def _model_of(sample):
    """The catalog model a capture is named after (lgip--<model>-<anything>.txt), or None."""
    tokens = sample.stem.split("--", 1)[1].split("-")
    for end in range(len(tokens), 0, -1):
        if _mig.find_gpu_model("-".join(tokens[:end])):
            return _mig.find_gpu_model("-".join(tokens[:end]))
    return None


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.name.split("--")[0] in ("lgip", "lgipp") and _model_of(s)],
                         ids=lambda p: p.stem)
def test_captures_agree_with_the_catalog(sample):
    model = _model_of(sample)
    text = _read(sample)
    if sample.name.startswith("lgipp--"):
        differences = mig_nodes.hardware_differences(model, gi_placements=_nvsmi.parse_gi_placements(text))
    else:
        differences = mig_nodes.hardware_differences(model, gi_profiles=_nvsmi.parse_gi_profiles(text))
    assert differences == []


def test_catalog_comparison_reports_differences():
    placements = _nvsmi.parse_gi_placements(_read(FIXTURES / "lgipp--A100-40GB-8-slot.txt"))
    # the 8-slot table is not the A30's
    differences = mig_nodes.hardware_differences("A30", gi_placements=placements)
    assert "GPU 0 lists placements for profile ID 19, not in the A30-24GB catalog" in differences
    assert "GPU 0: profile ID 14 (1g.6gb) placements {0,2,4}:2, the catalog says {0,1,2,3}:1" in differences
    profiles = _nvsmi.parse_gi_profiles(_read(FIXTURES / "lgip--H100-80GB.txt"))
    # an 80GB part's table read as an A100-40GB: 1g.10gb is the 40GB part's double-memory profile
    assert mig_nodes.hardware_differences("A100-40GB", gi_profiles=[profiles[0], profiles[-1]]) == [
        "GPU 0: 1g.10gb has profile ID 19, the catalog says 15",
        "GPU 0: 1g.10gb allows 7 instances, the catalog says 4",
        "GPU 0 lists profile 7g.80gb (ID 0), not in the A100-40GB catalog"]


def test_whitespace_does_not_matter():
    text = _read(FIXTURES / "lgi--a100-3-2-1-1-narrow.txt")
    expected = _nvsmi.parse_gi(text)
    noisy = "\n\n" + text.replace("  ", "\t ").replace("\n", "   \r\n")
    assert _nvsmi.parse_gi(noisy) == expected
    old = _read(FIXTURES / "list--old-driver-mig-uuids.txt")
    assert _nvsmi.parse_list(old.replace("\n", "\r\n")) == _nvsmi.parse_list(old)
    listing = _read(FIXTURES / "list--aks-a100-single.txt")
    assert _nvsmi.parse_list(listing.replace("  MIG", "\tMIG").splitlines()) == _nvsmi.parse_list(listing)


@pytest.mark.parametrize("parser, message", [
    (_nvsmi.parse_gi_profiles, "No MIG-enabled devices found."),
    (_nvsmi.parse_gi_placements, "No MIG-enabled devices found."),
    (_nvsmi.parse_gi, "No GPU instances found: Not Found"),
    (_nvsmi.parse_ci, "No compute instances found: Not Found\n"),
    (_nvsmi.parse_list, "No devices were found\n"),
    (_nvsmi.parse_query_csv, ""),
    (_nvsmi.parse_mig_messages, ""),
    (_nvsmi.parse_list, None),
])
def test_nothing_found_is_an_empty_list(parser, message):
    assert parser(message) == []


@pytest.mark.parametrize("parser", [_nvsmi.parse_gi_profiles, _nvsmi.parse_gi_placements, _nvsmi.parse_gi,
                                    _nvsmi.parse_ci, _nvsmi.parse_list, _nvsmi.parse_query_xml])
def test_unexpected_text_is_an_error_carrying_the_message(parser):
    with pytest.raises(_nvsmi.NvsmiError, match="Insufficient Permissions"):
        parser("Unable to list: Insufficient Permissions")


def test_mig_devices_flattens_the_listing():
    devices = _nvsmi.mig_devices(_read(FIXTURES / "list--old-driver-mig-uuids.txt"))
    assert [(d["gpu"], d["profile"], d["gpu_instance_id"]) for d in devices] == [(0, "3g.20gb", 1), (0, "3g.20gb", 2)]
    assert devices[0]["gpu_name"] == "A100-SXM4-40GB"
    with pytest.raises(_nvsmi.NvsmiError, match="before any GPU"):
        _nvsmi.parse_list("  MIG 1g.5gb Device 0: (UUID: MIG-fb42055e-9e53-5764-9278-438605a3014c)")


def test_listing_problems():
    single = _read(FIXTURES / "list--aks-a100-single.txt")
    mixed = _read(FIXTURES / "list--aks-a100-mixed.txt")
    assert _nvsmi.listing_problems(mixed, "1g.5gb", 1) == []
    assert _nvsmi.listing_problems(single, "1g.5gb", 1) == []
    assert _nvsmi.listing_problems(single, "1g.5gb", 1, exact=True) == [
        "7 MIG 1g.5gb device(s) listed, expected 1"]
    assert _nvsmi.listing_problems(mixed, "2g.10gb", 1) == [
        "MIG devices of profile 1g.5gb listed, expected only 2g.10gb",
        "0 MIG 2g.10gb device(s) listed, expected at least 1"]
    whole_gpu = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
    assert _nvsmi.listing_problems(whole_gpu, "1g.5gb") == ["0 MIG 1g.5gb device(s) listed, expected at least 1"]
    assert _nvsmi.listing_problems("", "1g.5gb") == [
        "nvidia-smi -L listed no GPU", "0 MIG 1g.5gb device(s) listed, expected at least 1"]
    assert "couldn't communicate" in _nvsmi.listing_problems(_read(FIXTURES / "list--driver-not-loaded.txt"),
                                                             "1g.5gb")[0]


def test_csv_field_handling():
    text = _read(FIXTURES / "csv--mig-mode-header.txt")
    assert _nvsmi.parse_query_csv(text, ["pci.bus_id", "mig.mode.current", "mig.mode.pending"]) == \
        _nvsmi.parse_query_csv(text)
    with_units = "index, memory.total [MiB]\n0, 81559 MiB\n"
    assert _nvsmi.parse_query_csv(with_units) == [{"index": "0", "memory.total": "81559 MiB"}]
    with pytest.raises(_nvsmi.NvsmiError, match="2 values for 3 fields"):
        _nvsmi.parse_query_csv("0, Enabled\n", "index,mig.mode.current,mig.mode.pending")
    with pytest.raises(_nvsmi.NvsmiError, match="no header row"):
        _nvsmi.parse_query_csv("0, Enabled\n")
    with pytest.raises(_nvsmi.NvsmiError, match="Field .* is not a valid field"):
        _nvsmi.parse_query_csv('Field "mig.mode.bogus" is not a valid field to query.\n', "index,mig.mode.bogus")


def test_xml_errors():
    with pytest.raises(_nvsmi.NvsmiError, match="not XML"):
        _nvsmi.parse_query_xml("<nvidia_smi_log><gpu></nvidia_smi_log>")
    assert _nvsmi.parse_query_xml("<nvidia_smi_log></nvidia_smi_log>") == []


def test_error_messages_are_events():
    events = _nvsmi.parse_mig_messages(
        "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources\n"
        "Disabled MIG Mode for GPU 00000000:3B:00.0\nAll done.\n")
    assert events == [
        {"event": "error", "message": "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources"},
        {"event": "mig_disabled", "bus_id": "00000000:3B:00.0"},
    ]
