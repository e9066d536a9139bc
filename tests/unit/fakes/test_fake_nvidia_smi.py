# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake nvidia-smi (tests/fakes) is only useful when it behaves like the real tool: its output
must read like the captured samples, its state must follow the MIG placement rules, and it must
refuse what nvidia-smi refuses, with nvidia-smi's exit codes."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake

FAKES = pathlib.Path(fake.__file__).parent
SAMPLES = pathlib.Path(__file__).parents[1] / "plugins" / "module_utils" / "fixtures" / "nvsmi"


def smi(state, *argv):
    rc, output, _write = fake.run(list(argv), state)
    return rc, output


def ok(state, *argv):
    rc, output = smi(state, *argv)
    assert rc == 0, output
    return output


@pytest.mark.parametrize("argv, preset, sample", [
    (["mig", "-lgip"], "H100-80GB,mig", "lgip--H100-80GB.txt"),
    (["mig", "-lgipp"], "A100-40GB,mig", "lgipp--A100-40GB-8-slot.txt"),
    (["mig", "-lgipp"], "A30-24GB,mig", "lgipp--A30-24GB.txt"),
    (["mig", "-lgip"], "H100-80GB", "lgip--mig-disabled.txt"),
])
def test_output_matches_the_captured_samples(argv, preset, sample):
    _rc, output = smi(fake.preset_state(preset), *argv)
    assert output == (SAMPLES / sample).read_text(encoding="utf-8")


def test_instance_tables_match_the_captured_samples():
    state = fake.preset_state("H100-80GB,mig")
    ok(state, "mig", "-cgi", "19", "-C")
    assert ok(state, "mig", "-lgi") == (SAMPLES / "lgi--h100-one-instance.txt").read_text(encoding="utf-8")
    assert ok(state, "mig", "-lci") == (SAMPLES / "lci--h100-with-placement.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30-24GB"])
def test_profile_tables_agree_with_the_catalog(kind):
    state = fake.preset_state(kind + ",mig")
    model = fake.GPU_KINDS[kind]["model"]
    profiles = _nvsmi.parse_gi_profiles(ok(state, "mig", "-lgip"))
    placements = _nvsmi.parse_gi_placements(ok(state, "mig", "-lgipp"))
    assert mig_nodes.hardware_differences(model, profiles, placements) == []
    assert {p["profile"] for p in profiles} == {n for n, p in _mig.CATALOG[model]["profiles"].items()
                                                if p["gpu_instance_profile_id"] is not None}


def test_mig_state_persists_and_follows_the_placement_rules():
    state = fake.preset_state("A100-40GB x2")
    ok(state, "-i", "0", "-mig", "1")
    # the MIG guide's 3-2-1-1 example: 3g first lands at slot 4
    events = _nvsmi.parse_mig_messages(ok(state, "mig", "-i", "0", "-cgi", "9,14,19,19", "-C"))
    assert [e["event"] for e in events] == ["created_gi", "created_ci"] * 4
    gis = _nvsmi.parse_gi(ok(state, "mig", "-lgi"))
    assert sorted((g["profile"], g["start"], g["instance_id"]) for g in gis) == [
        ("1g.5gb", 2, 9), ("1g.5gb", 3, 10), ("2g.10gb", 0, 3), ("3g.20gb", 4, 2)]
    devices = _nvsmi.mig_devices(ok(state, "-L"))
    assert len(devices) == 4 and len({d["uuid"] for d in devices}) == 4
    assert all(d["gpu"] == 0 for d in devices)
    # free counts follow the occupancy (the GPU is full; after freeing slot 2 one 1g fits again)
    free = {p["profile"]: p["free"] for p in _nvsmi.parse_gi_profiles(ok(state, "mig", "-lgip", "-i", "0"))}
    assert set(free.values()) == {0}
    ok(state, "mig", "-i", "0", "-dci", "-gi", "9")
    ok(state, "mig", "-i", "0", "-dgi", "-gi", "9")
    free = {p["profile"]: p["free"] for p in _nvsmi.parse_gi_profiles(ok(state, "mig", "-lgip", "-i", "0"))}
    assert free["1g.5gb"] == 1 and free["1g.5gb+me"] == 1 and free["2g.10gb"] == 0


def test_placement_order_matters_as_on_the_real_gpu():
    state = fake.preset_state("A100-40GB,mig")
    ok(state, "mig", "-cgi", "19,19,19,19,19")        # five 1g from slot 0
    rc, output = smi(state, "mig", "-cgi", "9")          # 3g needs 0 or 4, both taken
    assert rc == fake.RC_OTHER
    assert "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources" in output


def test_explicit_placements_are_checked():
    state = fake.preset_state("H100-80GB,mig")
    rc, output = smi(state, "mig", "-cgi", "14:6")
    assert rc == fake.RC_INVALID and "Invalid Argument" in output
    ok(state, "mig", "-cgi", "9:0,14:4")
    rc, output = smi(state, "mig", "-cgi", "14:4")
    assert rc == fake.RC_OTHER and "Insufficient Resources" in output
    assert [g["start"] for g in _nvsmi.parse_gi(ok(state, "mig", "-lgi"))] == [0, 4]


@pytest.mark.parametrize("argv", [["mig", "-cgi", "20,20"], ["mig", "-cgi", "0,19"], ["mig", "-cgi", "15,15,15,15,19"]])
def test_limits_of_the_catalog_are_enforced(argv):
    state = fake.preset_state("H100-80GB,mig")
    rc, output = smi(state, *argv)
    assert rc == fake.RC_OTHER and "Insufficient Resources" in output


def test_compute_instances_split_a_gpu_instance():
    state = fake.preset_state("H100-80GB,mig")
    ok(state, "mig", "-cgi", "9:0")
    ok(state, "mig", "-cci", "0,0,0", "-gi", "1")
    cis = _nvsmi.parse_ci(ok(state, "mig", "-lci"))
    assert [(c["profile"], c["instance_id"], c["start"]) for c in cis] == [("1c.3g.40gb", i, i) for i in range(3)]
    rc, output = smi(state, "mig", "-cci", "0", "-gi", "1")
    assert rc == fake.RC_OTHER and "Insufficient Resources" in output
    rc, output = smi(state, "mig", "-cci", "4", "-gi", "1")      # a 7-slice CI in a 3g instance
    assert rc == fake.RC_INVALID
    assert len(_nvsmi.mig_devices(ok(state, "-L"))) == 3


def test_destroy_needs_compute_instances_gone_first():
    state = fake.preset_state("H100-80GB,mig")
    ok(state, "mig", "-cgi", "9:4", "-C")
    rc, output = smi(state, "mig", "-dgi", "-gi", "2")
    assert rc == fake.RC_OTHER and "In use by another client" in output
    ok(state, "mig", "-dci", "-gi", "2")
    assert _nvsmi.parse_mig_messages(ok(state, "mig", "-dgi", "-gi", "2"))[0]["event"] == "destroyed_gi"
    rc, output = smi(state, "mig", "-lgi")
    assert rc == fake.RC_NOT_FOUND and _nvsmi.parse_gi(output) == []


def test_gpu_in_use_keeps_mig_mode_pending_and_refuses_reset():
    state = fake.preset_state("A100-80GB x2")
    fake.control(["process", "add", "1", "4242", "python3"], state)
    output = ok(state, "-i", "1", "-mig", "1")
    assert _nvsmi.parse_mig_messages(output)[0]["event"] == "mig_pending"
    rows = _nvsmi.parse_query_csv(ok(state, "--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv"))
    assert rows[1] == {"index": "1", "mig.mode.current": "Disabled", "mig.mode.pending": "Enabled"}
    rc, output = smi(state, "-i", "1", "-r")
    assert rc == fake.RC_OTHER and "In use by another client" in output
    apps = _nvsmi.parse_query_csv(ok(state, "--query-compute-apps=gpu_uuid,pid,process_name",
                                     "--format=csv,noheader"), "gpu_uuid,pid,process_name")
    assert apps == [{"gpu_uuid": state["gpus"][1]["uuid"], "pid": "4242", "process_name": "python3"}]
    fake.control(["process", "clear"], state)
    ok(state, "-i", "1", "-r")
    assert state["gpus"][1]["mig_current"] == "Enabled"


def test_a_passthrough_vm_needs_a_reset_or_reboot():
    state = fake.preset_state("H100-80GB")
    fake.control(["set", "reset_supported", "false"], state)
    events = _nvsmi.parse_mig_messages(ok(state, "-mig", "1"))
    assert events[0]["event"] == "mig_pending" and "Not Supported" in events[0]["reason"]
    rc, output = smi(state, "-r")
    assert rc == fake.RC_NOT_SUPPORTED and "not supported" in output


@pytest.mark.parametrize("preset, argv, rc, text", [
    ("no-driver", ["-L"], fake.RC_NO_DRIVER, "couldn't communicate with the NVIDIA driver"),
    ("none", ["-L"], fake.RC_NOT_FOUND, "No devices were found"),
    ("H100-80GB", ["-i", "5", "-L"], fake.RC_NOT_FOUND, "No devices were found"),
    ("H100-80GB", ["--query-gpu=index,bogus", "--format=csv"], fake.RC_INVALID, 'Field "bogus" is not a valid field'),
    ("H100-80GB", ["--query-gpu=index"], fake.RC_INVALID, "--format"),
    ("H100-80GB", ["--query-gpu=index", "--format=json"], fake.RC_INVALID, "not a valid format"),
    ("H100-80GB", ["-lgi"], fake.RC_INVALID, "Invalid combination of input arguments"),
    ("H100-80GB", ["mig", "-frobnicate"], fake.RC_INVALID, "is not recognized"),
    ("H100-80GB", ["mig", "-cgi", "9"], fake.RC_NOT_FOUND, "No MIG-enabled devices found"),
    ("H100-80GB,mig", ["mig", "-cgi", "3g.41gb"], fake.RC_INVALID, "Invalid Argument"),
    ("H100-80GB,mig", ["mig", "-dgi"], fake.RC_NOT_FOUND, "No GPU instances found"),
    ("H100-80GB", ["-mig", "2"], fake.RC_INVALID, "Invalid combination"),
    ("L4", ["-mig", "1"], fake.RC_NOT_SUPPORTED, "Not Supported"),
    ("H100-80GB", ["-c", "1"], fake.RC_INVALID, "deprecated"),
    ("H100-80GB", ["-c", "FAST"], fake.RC_INVALID, "Invalid compute mode"),
])
def test_failures_look_like_nvidia_smi(preset, argv, rc, text):
    got_rc, output = smi(fake.preset_state(preset), *argv)
    assert got_rc == rc and text in output


def test_writes_need_root():
    state = fake.preset_state("H100-80GB,mig")
    fake.control(["set", "root", "false"], state)
    rc, output = smi(state, "mig", "-cgi", "19")
    assert rc == fake.RC_NO_PERMISSION and "Insufficient Permissions" in output
    assert state["gpus"][0]["gpu_instances"] == []


def test_compute_mode_and_disable_rules():
    state = fake.preset_state("H100-80GB,mig")
    assert "EXCLUSIVE_PROCESS" in ok(state, "-i", "0", "-c", "3")
    assert "Compute Mode                          : Exclusive_Process" in ok(state, "-q", "-d", "COMPUTE")
    ok(state, "mig", "-cgi", "0", "-C")
    rc, output = smi(state, "-mig", "0")
    assert rc == fake.RC_OTHER and "In use by another client" in output


def test_old_drivers_list_fewer_profiles():
    state = fake.preset_state("A100-40GB,mig")
    fake.control(["set", "hidden_profile_ids", "[15, 20]"], state)
    ids = [row["profile_id"] for row in _nvsmi.parse_gi_placements(ok(state, "mig", "-lgipp"))]
    assert ids == [19, 14, 9, 5, 0]
    rc, _output = smi(state, "mig", "-cgi", "15")
    assert rc == fake.RC_INVALID


def test_query_and_xml_forms_parse():
    state = fake.preset_state("H200-141GB x2")
    ok(state, "-i", "1", "-mig", "1")
    ok(state, "mig", "-i", "1", "-cgi", "9,9", "-C")
    fields = "index,uuid,name,memory.total,mig.mode.current,mig.mode.pending,compute_mode,compute_cap,driver_version"
    rows = _nvsmi.parse_query_csv(ok(state, "--query-gpu=" + fields, "--format=csv,noheader,nounits"), fields)
    assert rows[0]["name"] == "NVIDIA H200" and rows[0]["memory.total"] == "143771"
    assert rows[1]["mig.mode.current"] == "Enabled" and rows[0]["compute_cap"] == "9.0"
    header = ok(state, "--query-gpu=index,memory.total", "--format=csv").splitlines()[0]
    assert header == "index, memory.total [MiB]"
    gpus = _nvsmi.parse_query_xml(ok(state, "-q", "-x"))
    assert [len(g["mig_devices"]) for g in gpus] == [0, 2]
    assert "CUDA Version                              : 12.4" in ok(state, "-q")


def test_faults_are_injected_once():
    state = fake.preset_state("H100-80GB,mig")
    fake.control(["fault", "-cgi", "15", "Unable to create a GPU instance: Unknown Error"], state)
    assert smi(state, "mig", "-cgi", "19") == (15, "Unable to create a GPU instance: Unknown Error\n")
    ok(state, "mig", "-cgi", "19")


def test_the_executable_keeps_state_and_logs_calls(tmp_path):
    env = dict(os.environ, FAKE_NVIDIA_SMI_STATE=str(tmp_path / "state.json"), FAKE_NVIDIA_SMI_PRESET="A100-40GB x2",
               FAKE_NVIDIA_SMI_LOG=str(tmp_path / "calls.jsonl"))

    def call(*argv):
        return subprocess.run([sys.executable, str(FAKES / "nvidia-smi")] + list(argv), env=env, text=True,
                              capture_output=True, check=False)

    assert call("-i", "0", "-mig", "1").returncode == 0
    assert call("mig", "-i", "0", "-cgi", "0", "-C").returncode == 0
    listing = call("-L")
    assert len(_nvsmi.parse_list(listing.stdout)[0]["mig_devices"]) == 1
    log = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [entry["write"] for entry in log] == [True, True, False]
    assert [entry["rc"] for entry in log] == [0, 0, 0]
