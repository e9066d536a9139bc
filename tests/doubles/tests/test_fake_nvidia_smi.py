# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake nvidia-smi (tests/fakes) is only useful when it behaves like the real tool: its output
must read like the captured samples, its state must follow the MIG placement rules, and it must
refuse what nvidia-smi refuses, with nvidia-smi's exit codes. It is an oracle independent of the
collection: it never loads plugins/, and its profile data must agree with the production catalog."""

from __future__ import annotations

import ast
import copy
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

# The production MIG catalog, compared with the fake's own data below: the one place to re-point
# when the catalog module moves.
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake

FAKES = pathlib.Path(fake.__file__).parent
REPO = FAKES.parents[1]
SAMPLES = pathlib.Path(__file__).parents[2] / "unit" / "plugins" / "module_utils" / "fixtures" / "nvsmi"
MIG_KINDS = ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30-24GB"]


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


# --------------------------------------------------------------------------------------------
# An independent oracle: the fake's data comes from the captures, never from plugins/
# --------------------------------------------------------------------------------------------


def test_the_fake_source_does_not_import_the_collection():
    for path in (FAKES / "fake_nvidia_smi.py", FAKES / "nvidia-smi"):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert imported, path                                   # the scan sees the imports that are there
        assert [m for m in imported if "plugins" in m or "_mig" in m or m.startswith(("ansible", "importlib"))] == []
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert names & {"__import__", "import_module", "spec_from_file_location", "exec", "exec_module"} == set()
        strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
        assert [s for s in strings if re.search(r"\b_mig\b|\bmig\.py\b|_catalog|(?<!unit/)plugins/module_utils", s)] == []
    # the one path with "plugins" in it is the capture folder under tests/unit
    captures = pathlib.Path(fake.CAPTURES).resolve()
    assert captures == SAMPLES.resolve() and captures.is_relative_to(REPO.resolve() / "tests")


_WATCH_LOADS = r"""
import json, os, sys
fakes, kinds = sys.argv[1], sys.argv[2].split(",")
opened = []
sys.addaudithook(lambda event, args: opened.append(os.fspath(args[0])) if event == "open" and isinstance(
    args[0], (str, bytes, os.PathLike)) and not isinstance(args[0], bytes) else None)
sys.path.insert(0, fakes)
import fake_nvidia_smi as fake
for kind in kinds:
    state = fake.preset_state(kind + ",mig")
    for argv in (["mig", "-lgip"], ["mig", "-lgipp"], ["mig", "-cgi", "0", "-C"], ["-q", "-x"], ["-L"]):
        assert fake.run(argv, state)[0] == 0, (kind, argv)
modules = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
print(json.dumps(dict(opened=opened, modules=modules)))
"""


def test_the_fake_loads_nothing_from_plugins():
    """Import the fake and run it in a fresh interpreter, watching every file it opens and every module it loads."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", _WATCH_LOADS, str(FAKES), ",".join(MIG_KINDS)], env=env, text=True,
                          capture_output=True, check=True)
    seen = json.loads(done.stdout)
    plugins = (REPO / "plugins").resolve()
    opened = [pathlib.Path(p).resolve() for p in seen["opened"]]
    assert [p for p in opened if p.is_relative_to(plugins)] == []
    # the watch works: it saw the fake read its captures
    assert {p.name for p in opened if p.parent == SAMPLES.resolve()} == {
        "lgipp--A100-40GB-8-slot.txt", "lgip--H100-80GB.txt", "lgipp--A30-24GB.txt"}
    loaded = {name: path for name, path in seen["modules"].items()
              if "plugins" in name or "_mig" in name.split(".")[-1] or name.startswith("ansible")
              or path and pathlib.Path(path).resolve().is_relative_to(plugins)}
    assert loaded == {}
    assert "fake_nvidia_smi" in seen["modules"]


def _disagreements(kind, model, entry):
    """Where the fake's profile data of ``kind`` and a catalog ``entry`` differ (profile ID, instances, placements)."""
    ours = fake.MIG_MODELS[kind]
    theirs = {p["name"]: p for p in entry["profiles"].values() if p["gpu_instance_profile_id"] is not None}
    problems = []
    if sorted(ours["profiles"]) != sorted(theirs):
        problems.append("%s: profiles %s, the catalog has %s" % (kind, sorted(ours["profiles"]), sorted(theirs)))
    for key in ("memory_slices", "compute_slices"):
        if ours[key] != entry[key]:
            problems.append("%s: %s %s, the catalog says %s" % (kind, key, ours[key], entry[key]))
    for name in sorted(set(ours["profiles"]) & set(theirs)):
        for key in ("gpu_instance_profile_id", "max_instances", "placements", "memory_slices", "compute_slices",
                    "memory_gb", "media_extensions"):
            if ours["profiles"][name][key] != theirs[name][key]:
                problems.append("%s %s: %s %r, the catalog says %r" % (kind, name, key, ours["profiles"][name][key],
                                                                       theirs[name][key]))
    return problems


@pytest.mark.parametrize("kind", MIG_KINDS)
def test_the_fake_and_the_catalog_agree(kind):
    """Two independent sources, the captures/guide (fake) and the production catalog, say the same."""
    model = fake.GPU_KINDS[kind]["model"]
    assert _disagreements(kind, model, catalog.CATALOG[model]) == []
    assert fake.CI_PROFILE_IDS == catalog.COMPUTE_INSTANCE_PROFILE_IDS


@pytest.mark.parametrize("kind", MIG_KINDS)
def test_a_wrong_catalog_would_be_caught(kind):
    model = fake.GPU_KINDS[kind]["model"]
    wrong = copy.deepcopy(catalog.CATALOG[model])
    name = next(n for n, p in wrong["profiles"].items() if len(p["placements"]) > 1)
    wrong["profiles"][name]["placements"] = wrong["profiles"][name]["placements"][:-1]
    assert _disagreements(kind, model, wrong) == ["%s %s: placements %r, the catalog says %r" % (
        kind, name, fake.MIG_MODELS[kind]["profiles"][name]["placements"], wrong["profiles"][name]["placements"])]


@pytest.mark.parametrize("kind", MIG_KINDS)
def test_profile_tables_agree_with_the_catalog(kind):
    state = fake.preset_state(kind + ",mig")
    model = fake.GPU_KINDS[kind]["model"]
    profiles = _nvsmi.parse_gi_profiles(ok(state, "mig", "-lgip"))
    placements = _nvsmi.parse_gi_placements(ok(state, "mig", "-lgipp"))
    assert mig_nodes.hardware_differences(model, profiles, placements) == []
    assert {p["profile"] for p in profiles} == {n for n, p in catalog.CATALOG[model]["profiles"].items()
                                                if p["gpu_instance_profile_id"] is not None}


def test_the_placement_data_is_the_captures_text():
    """-lgipp of the kinds with a capture reprints it; the kinds without one reprint the shared 8-slot table."""
    eight_slot = (SAMPLES / "lgipp--A100-40GB-8-slot.txt").read_text(encoding="utf-8")
    for kind in ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"):
        assert ok(fake.preset_state(kind + ",mig"), "mig", "-lgipp") == eight_slot
    assert fake.parse_lgipp_capture("lgipp--A30-24GB.txt")[-1] == (0, [0], 4)


def test_a_malformed_capture_is_refused(tmp_path, monkeypatch):
    (tmp_path / "lgipp--bad.txt").write_text("GPU  0 Profile ID 19 Placements: {0,1,2}\n", encoding="utf-8")
    (tmp_path / "lgip--bad.txt").write_text("|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |\n",
                                            encoding="utf-8")
    monkeypatch.setattr(fake, "CAPTURES", str(tmp_path))
    with pytest.raises(ValueError, match="not a -lgipp line"):
        fake.parse_lgipp_capture("lgipp--bad.txt")
    with pytest.raises(ValueError, match="without its CE/JPEG/OFA line"):
        fake.parse_lgip_capture("lgip--bad.txt")


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
