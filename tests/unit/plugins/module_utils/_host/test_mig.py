# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_profile engine (plugins/module_utils/_host/mig.py) against the strict fake nvidia-smi (in-process).

Only nvidia-smi is faked; the engine, the catalog, the parsers and the plan helper run for real."""

from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mig as _mig_host
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake


class Host:
    """A fake GPU host: its state and every nvidia-smi call made against it."""

    def __init__(self, preset):
        self.state = fake.preset_state(preset)
        self.calls = []

    def run(self, argv):
        rc, output, write = fake.run(argv[1:], self.state)
        self.calls.append(dict(argv=argv[1:], rc=rc, write=write))
        return rc, output, ""

    @property
    def writes(self):
        return [" ".join(c["argv"]) for c in self.calls if c["write"]]

    def apply(self, gpus, check=False, allow_reset=True):
        self.calls = []
        params = dict(gpus=gpus, nvidia_smi="/usr/bin/nvidia-smi", allow_reset=allow_reset,
                      mig_parted_config_name="custom")
        return _mig_host.converge(params, self.run, check, True)

    def geometry(self, index=0):
        gpu = self.state["gpus"][index]
        return sorted((gi["profile"], gi["start"], tuple(sorted(c["slices"] for c in gi["compute_instances"])))
                      for gi in gpu["gpu_instances"])


def test_apply_reapply_change_and_check_mode():
    host = Host("A100-40GB x2")
    result = host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])])
    assert result["changed"] and not result["reboot_required"]
    # the solver puts the 3g at slot 4 (3g@0 leaves no room for 2g + 1g + 1g); created largest first
    assert host.writes[:5] == ["-i 0 -mig 1", "mig -i 0 -cgi 9:4 -C", "mig -i 0 -cgi 14:0 -C", "mig -i 0 -cgi 19:2 -C",
                               "mig -i 0 -cgi 19:3 -C"]
    for index in (0, 1):
        assert host.geometry(index) == [("1g.5gb", 2, (1,)), ("1g.5gb", 3, (1,)), ("2g.10gb", 0, (2,)),
                                        ("3g.20gb", 4, (3,))]
    assert len(result["mig_devices"]) == 8 and len(set(result["mig_devices"])) == 8
    listed = [d["uuid"] for d in _nvsmi.mig_devices(fake.run(["-L"], host.state)[1])]
    assert sorted(listed) == sorted(result["mig_devices"])
    assert result["mig_parted_config"]["mig-configs"]["custom"] == [{
        "devices": [0, 1], "device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
        "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]

    again = host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])])
    assert not again["changed"] and host.writes == [] and again["changes"] == []
    assert again["mig_devices"] == result["mig_devices"]

    # change GPU 1 only: the 3g and the 2g stay, the two 1g go, one 2g comes (as the placement rules allow)
    before = set(again["gpus"][1]["mig_devices"])
    planned = host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]),
                          dict(gpu="1", profiles=["3g.20gb", "2g.10gb", "2g.10gb"])], check=True)
    assert planned["changed"] and host.writes == []
    assert sorted(c["action"] for c in planned["changes"]) == ["create", "delete", "delete"]
    assert all(c["name"].startswith("gpu1/") for c in planned["changes"])
    assert [c["name"] for c in planned["changes"]] == ["gpu1/1g.5gb@2 [1]", "gpu1/1g.5gb@3 [1]", "gpu1/2g.10gb@2 [2]"]
    assert planned["diff"][2]["after"] == '"2g.10gb@2 [2]"\n'
    changed = host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]),
                          dict(gpu="1", profiles=["3g.20gb", "2g.10gb", "2g.10gb"])])
    assert changed["changed"]
    assert all(w.startswith("mig -i 1") for w in host.writes)
    assert [p for p, _s, _c in host.geometry(1)] == ["2g.10gb", "2g.10gb", "3g.20gb"]
    kept = before & set(changed["gpus"][1]["mig_devices"])
    assert len(kept) == 2  # the 3g and the first 2g kept their MIG devices


def test_compute_instance_splits_and_resplit():
    host = Host("H100-80GB,mig")
    host.apply([dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[1, 2]), "4g.40gb"])])
    assert host.geometry() == [("3g.40gb", 4, (1, 2)), ("4g.40gb", 0, (4,))]
    result = host.apply([dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[1, 1, 1]), "4g.40gb"])])
    assert [(c["action"], c["kind"]) for c in result["changes"]] == [("update", "compute_instances")]
    assert host.geometry() == [("3g.40gb", 4, (1, 1, 1)), ("4g.40gb", 0, (4,))]
    assert not any("-dgi" in w or "-cgi" in w for w in host.writes)


def test_named_layouts_and_disable():
    host = Host("H200-141GB")
    result = host.apply([dict(gpu="all", layout="all-balanced")])
    assert sorted(p for p, _s, _c in host.geometry()) == ["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"]
    assert result["gpus"][0]["placement_rules"] == "host"
    host.apply([dict(gpu="all", layout="all-1g.18gb")])
    assert [p for p, _s, _c in host.geometry()] == ["1g.18gb"] * 7
    host.apply([dict(gpu="all", layout="all-disabled")])
    assert host.state["gpus"][0]["mig_current"] == "Disabled" and host.geometry() == []
    assert not host.apply([dict(gpu="all", layout="disabled")])["changed"]


def test_gpu_in_use_reports_reboot_required_with_the_processes():
    host = Host("A100-80GB x2")
    fake.control(["process", "add", "1", "4242", "python3"], host.state)
    result = host.apply([dict(gpu="all", profiles=["7g.80gb"])])
    assert result["reboot_required"]
    assert result["pending"] == [dict(gpu=1, uuid=host.state["gpus"][1]["uuid"], processes=[{"pid": 4242, "name": "python3"}],
                                      reason="GPU 1: MIG mode enable is pending until a GPU reset or reboot; processes in "
                                             "the way: 4242 (python3)")]
    assert "-i 1 -r" not in host.writes and host.geometry(1) == [] and host.geometry(0) == [("7g.80gb", 0, (7,))]
    fake.control(["process", "clear"], host.state)
    again = host.apply([dict(gpu="all", profiles=["7g.80gb"])])
    # the processes are gone: enabling again takes effect at once (the driver resets the idle GPU itself)
    assert host.writes == ["-i 1 -mig 1", "mig -i 1 -cgi 0:0 -C"]
    assert not again["reboot_required"] and host.geometry(1) == [("7g.80gb", 0, (7,))]


def test_no_reset_without_allow_reset():
    host = Host("H100-80GB")
    fake.control(["set", "reset_supported", "false"], host.state)
    result = host.apply([dict(gpu="all", profiles=["7g.80gb"])], allow_reset=False)
    assert result["reboot_required"] and "allow_reset is false" in result["pending"][0]["reason"]
    assert host.writes == ["-i 0 -mig 1"]


def test_old_driver_rules_come_from_the_host():
    host = Host("A100-40GB,mig")
    fake.control(["set", "hidden_profile_ids", "[15, 20]"], host.state)
    with pytest.raises(_mig_host.MigError) as err:
        host.apply([dict(gpu="0", profiles=["1g.10gb"])])
    assert "GPU 0 (A100-40GB), profile 1g.10gb: the driver on this host does not offer it" in str(err.value)
    assert host.writes == []


# every refusal names the GPU (or the entry) and the profile, and happens before any nvidia-smi write
INVALID = [
    ("H100-80GB,mig", [dict(gpu="0", profiles=["3g.21gb"])], "GPU 0 (H100-80GB), profile 3g.21gb does not exist"),
    ("H100-80GB,mig", [dict(gpu="0", profiles=["1g.5gb"])], "profile 1g.5gb does not exist on H100-80GB"),
    ("H100-80GB", [dict(gpu="0", profiles=["1g.10gb"] * 8)], "8 x 1g.10gb requested, H100-80GB allows at most 7"),
    ("A100-40GB", [dict(gpu="0", profiles=["4g.20gb", "4g.20gb"])], "nearest layout that fits: [4g.20gb]"),
    ("A100-40GB", [dict(gpu="0", profiles=["7g.40gb", "1g.5gb"])], "GPU 0 (A100-40GB): layout [7g.40gb, 1g.5gb]"),
    ("H100-80GB", [dict(gpu="0", profiles=["1g.10gb+me", "1g.10gb+me"])], "media extensions"),
    ("H100-80GB", [dict(gpu="0", profiles=["3g.40gb", "3g.40gb", "1g.10gb"])], "nearest layout that fits: [3g.40gb, 3g.40gb]"),
    ("A100-80GB", [dict(gpu="0", profiles=["2g.20gb"] * 4)], "4 x 2g.20gb requested"),
    ("H100-80GB", [dict(gpu="0", profiles=["2g.20gb@6"])], "2g.20gb cannot start at slot 6; allowed starts: 0, 2, 4; nearest layout that fits: [2g.20gb]"),
    ("H100-80GB", [dict(gpu="0", profiles=["3g.40gb@0", "4g.40gb@0"])], "no non-overlapping placement"),
    ("H100-80GB", [dict(gpu="0", layout="all-2g.99gb")], "GPU 0 (H100-80GB) has no layout 'all-2g.99gb'"),
    ("H100-80GB", [dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[4])])],
     "GPU 0 (H100-80GB), profile 3g.40gb: a 4-slice compute instance does not fit"),
    ("H100-80GB", [dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[2, 2])])],
     "profile 3g.40gb: compute instances of 2+2 slices need 4"),
    ("H100-80GB x2", [dict(gpu="7", profiles=["7g.80gb"])], "gpus[0].gpu: no GPU 7 on this host"),
    ("H100-80GB", [dict(gpu="GPU-00000000-0000-0000-0000-000000000000", profiles=["7g.80gb"])], "no GPU GPU-0000"),
    ("L4", [dict(gpu="all", profiles=["1g.5gb"])], "GPU 0 (NVIDIA L4) does not support MIG"),
    ("H100-80GB", [dict(gpu="0", profiles=["big"])], "gpus[0].profiles[0]: 'big' is not a MIG profile name"),
    ("H100-80GB", [dict(gpu="0", profiles=["1g.20gb"] * 4 + ["1g.10gb"])], "GPU 0 (H100-80GB): layout"),
    ("H100-80GB", [dict(gpu="0", profiles=["7g.80gb"], layout="all-balanced")], "give exactly one of profiles"),
    ("H100-80GB", [dict(gpu="0", profiles=["7g.80gb"]), dict(gpu="0", layout="all-balanced")], "named twice"),
    ("H100-80GB", [dict(gpu="first", profiles=["7g.80gb"])], "'first' is not a GPU index"),
    ("H100-80GB", [dict(gpu="0", profiles=["1c.3g.40gb"])], "names a compute instance"),
    ("H100-80GB", [dict(gpu="0", profiles=[dict(profile="3g.40gb", cis=[1])])], "unknown keys cis"),
    ("H100-80GB x2", [dict(gpu="all", profiles=["7g.80gb"]), dict(gpu="1", profiles=["4g.40gb", "4g.40gb"])],
     "GPU 1 (H100-80GB): layout [4g.40gb, 4g.40gb]"),
    # long lists are answered at once (they took minutes when the nearest layout was searched over subsets)
    ("H100-80GB", [dict(gpu="0", profiles=["1g.10gb"] * 1000)],
     "GPU 0 (H100-80GB): layout [1000 x 1g.10gb] (1000 instances) does not fit: 1000 x 1g.10gb requested, H100-80GB allows at most 7"),
    ("H100-80GB", [dict(gpu="0", profiles=["1g.10gb"] * 1000)], "nearest layout that fits: [%s]" % ", ".join(["1g.10gb"] * 7)),
    ("H100-80GB", [dict(gpu="0", profiles=["3g.40gb", "2g.20gb", "1g.10gb", "4g.40gb"] * 5)],
     "layout [5 x 3g.40gb, 5 x 2g.20gb, 5 x 1g.10gb, 5 x 4g.40gb] (20 instances) does not fit"),
]


@pytest.mark.parametrize("preset, gpus, message", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_layouts_are_refused_before_any_write(preset, gpus, message):
    host = Host(preset)
    with pytest.raises(_mig_host.MigError) as err:
        host.apply(gpus)
    assert message in str(err.value)
    assert host.writes == []


def test_every_problem_is_reported_at_once():
    host = Host("H100-80GB x2")
    with pytest.raises(_mig_host.MigError) as err:
        host.apply([dict(gpu="0", profiles=["9g.80gb"]), dict(gpu="1", profiles=["1g.10gb"] * 9)])
    assert len(err.value.details["problems"]) == 2 and host.writes == []


def test_nvidia_smi_failure_mid_apply_converges_on_rerun():
    host = Host("H100-80GB,mig")
    fake.control(["fault", "-cgi 14", "255", "Unable to create a GPU instance on GPU  0 using profile 14: Unknown Error"],
                 host.state)
    with pytest.raises(_mig_host.MigError) as err:
        host.apply([dict(gpu="0", profiles=["3g.40gb", "2g.20gb", "2g.20gb"])])
    assert "Unknown Error" in str(err.value)
    result = host.apply([dict(gpu="0", profiles=["3g.40gb", "2g.20gb", "2g.20gb"])])
    assert result["changed"] and sorted(p for p, _s, _c in host.geometry()) == ["2g.20gb", "2g.20gb", "3g.40gb"]
    assert not host.apply([dict(gpu="0", profiles=["3g.40gb", "2g.20gb", "2g.20gb"])])["changed"]


class LossyHost(Host):
    """A host whose nvidia-smi answers one write as done but keeps its state (a driver that drops a request)."""

    def __init__(self, preset, dropped):
        super().__init__(preset)
        self.dropped = dropped

    def run(self, argv):
        text = " ".join(argv[1:])
        if self.dropped is not None and (self.dropped(text) if callable(self.dropped) else text == self.dropped):
            rc, output, write = fake.run(argv[1:], copy.deepcopy(self.state))
            self.calls.append(dict(argv=argv[1:], rc=rc, write=write))
            return rc, output, ""
        return super().run(argv)


def test_a_read_back_that_disagrees_with_the_plan_says_what_was_planned_shown_and_written():
    host = LossyHost("A100-40GB x2", "mig -i 1 -cgi 14:0 -C")
    with pytest.raises(_mig_host.MigError) as err:
        host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])])
    message = str(err.value)
    assert "read back after the changes differs from the plan" in message, message
    assert "GPU 1 (A100-40GB): planned [1g.5gb@2 [1], 1g.5gb@3 [1], 2g.10gb@0 [2], 3g.20gb@4 [3]], " \
           "nvidia-smi shows [1g.5gb@2 [1], 1g.5gb@3 [1], 3g.20gb@4 [3]]" in message, message
    assert "GPU 0" not in message, "a GPU that reads back as planned is not reported"
    assert "written: -i 0 -mig 1; mig -i 0 -cgi 9:4 -C" in message and "mig -i 1 -cgi 14:0 -C" in message, message
    # a re-run on an honest host converges from what is there
    honest = Host("A100-40GB x2")
    honest.state = host.state
    again = honest.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])])
    assert again["changed"] and honest.writes == ["mig -i 1 -cgi 14:0 -C"]


def test_a_dropped_compute_split_is_reported_with_the_split_planned():
    host = LossyHost("A100-40GB x2", None)
    host.apply([dict(gpu="0", profiles=["3g.20gb"])])
    host.dropped = lambda text: " -cci " in text
    with pytest.raises(_mig_host.MigError) as err:
        host.apply([dict(gpu="0", profiles=[dict(profile="3g.20gb", compute_instances=[1, 1, 1])])])
    assert "GPU 0 (A100-40GB): planned [3g.20gb@0 [1+1+1]], nvidia-smi shows [3g.20gb@0 [no compute instance]]" \
        in str(err.value), str(err.value)
    assert "written: mig -i 0 -dci -gi" in str(err.value) and "-cci 0,0,0" in str(err.value), str(err.value)


def test_offline_plan_needs_no_nvidia_smi():
    def no_smi(argv):
        raise AssertionError("nvidia-smi called in render mode: %s" % argv)

    params = dict(gpus=[dict(gpu="all", layout="all-balanced"), dict(gpu="1", profiles=["7g.80gb"])],
                  nvidia_smi=None, allow_reset=False, mig_parted_config_name="hosts", offline=dict(model="H100-80GB", count=2))
    result = _mig_host.converge(params, no_smi, False, False)
    assert [c["kind"] for c in result["changes"]] == ["mig_mode"] + ["gpu_instance"] * 4 + ["mig_mode", "gpu_instance"]
    assert [i["profile"] for i in result["gpus"][1]["instances"]] == ["7g.80gb"]
    configs = result["mig_parted_config"]["mig-configs"]["hosts"]
    assert [c["devices"] for c in configs] == [[0], [1]]
    assert configs[0]["mig-devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    with pytest.raises(_mig_host.MigError) as err:
        _mig_host.converge(dict(params, offline=dict(model="H100-80GB", count=1),
                           gpus=[dict(gpu="0", profiles=["4g.40gb", "4g.40gb"])]), no_smi, False, False)
    assert "GPU 0 (H100-80GB): layout [4g.40gb, 4g.40gb] does not fit" in str(err.value)


def test_compute_instance_splits_are_exported_as_mig_parted_counts_them():
    host = Host("H100-80GB")
    result = host.apply([dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[2, 1]),
                                                 dict(profile="3g.40gb", compute_instances=[1])])])
    assert host.geometry() == [("3g.40gb", 0, (1, 2)), ("3g.40gb", 4, (1,))]
    devices = result["mig_parted_config"]["mig-configs"]["custom"][0]["mig-devices"]
    assert devices == {"2c.3g.40gb": 1, "1c.3g.40gb": 2}
    assert result["mig_parted_differences"] == []  # mig-parted packs 2+1 then 1: the same geometry
    regrouped = host.apply([dict(gpu="0", profiles=[dict(profile="3g.40gb", compute_instances=[2]),
                                                    dict(profile="3g.40gb", compute_instances=[1, 1])])])
    assert regrouped["mig_parted_config"]["mig-configs"]["custom"][0]["mig-devices"] == devices
    assert regrouped["mig_parted_differences"] == [
        "GPU 0: mig-parted would create 3g.40gb[1], 3g.40gb[2+1] from the exported config, the GPU has 3g.40gb[1+1], "
        "3g.40gb[2] (mig-parted counts compute instances per profile, not which GPU instance holds them, and skips GPU "
        "instances without one)"]
    whole = host.apply([dict(gpu="0", profiles=[dict(profile="7g.80gb", compute_instances=[1] * 7)])])
    assert whole["mig_parted_config"]["mig-configs"]["custom"][0]["mig-devices"] == {"1c.7g.80gb": 7}
    assert whole["mig_parted_differences"] == []


def test_offline_plan_exports_compute_instance_splits():
    params = dict(gpus=[dict(gpu="all", profiles=[dict(profile="4g.40gb", compute_instances=[2, 2]), "3g.40gb"])],
                  nvidia_smi=None, allow_reset=False, mig_parted_config_name="split",
                  offline=dict(model="H100-80GB", count=2))
    result = _mig_host.converge(params, None, False, False)
    assert result["mig_parted_config"]["mig-configs"]["split"] == [{
        "devices": [0, 1], "device-filter": ["0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"],
        "mig-enabled": True, "mig-devices": {"2c.4g.40gb": 2, "3g.40gb": 1}}]
    assert result["mig_parted_differences"] == []


def test_instances_in_use_are_not_removed_and_no_gpu_is_touched():
    """A process on one MIG instance of GPU 1: a new layout for both GPUs destroys nothing anywhere (no partial teardown)."""
    host = Host("A100-40GB x2")
    host.apply([dict(gpu="all", profiles=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])])
    busy_gi = host.state["gpus"][1]["gpu_instances"][0]["id"]
    fake.control(["process", "add", "1", "4242", "python3", str(busy_gi)], host.state)
    before = [host.geometry(0), host.geometry(1)]
    for check in (True, False):
        with pytest.raises(_mig_host.MigError) as err:
            host.apply([dict(gpu="all", profiles=["7g.40gb"])], check=check)
        assert host.writes == []
        assert [host.geometry(0), host.geometry(1)] == before
    message = str(err.value)
    assert message.startswith("the requested MIG geometry cannot be applied (nothing was changed): GPU 1 (A100-40GB): "
                              "cannot remove or re-split ")
    assert "while compute processes run on the GPU: 4242 (python3); stop those processes" in message
    assert "GPU 0" not in message
    # re-splitting compute instances of a busy GPU is refused the same way; adding beside running work is not
    with pytest.raises(_mig_host.MigError):
        host.apply([dict(gpu="1", profiles=[dict(profile="3g.20gb", compute_instances=[1, 1, 1]), "2g.10gb", "1g.5gb",
                                            "1g.5gb"])])
    fake.control(["process", "clear"], host.state)
    host.apply([dict(gpu="1", profiles=["3g.20gb"])])
    fake.control(["process", "add", "1", "4243", "python3", str(host.state["gpus"][1]["gpu_instances"][0]["id"])],
                 host.state)
    result = host.apply([dict(gpu="1", profiles=["3g.20gb", "2g.10gb"])])
    assert result["changed"] and all(" -cgi " in w for w in host.writes)
    # the processes end: the same change goes through
    fake.control(["process", "clear"], host.state)
    assert host.apply([dict(gpu="all", profiles=["7g.40gb"])])["changed"]
    assert host.geometry(0) == host.geometry(1) == [("7g.40gb", 0, (7,))]


# ---- what the mutation check (scripts/mutate.py) showed untested: boundaries, messages, results

def _offline(count, model="H100-80GB", gpus=None):
    params = dict(gpus=gpus or [dict(gpu="all", profiles=["7g.80gb"])], nvidia_smi=None, allow_reset=False,
                  mig_parted_config_name="c", offline=dict(model=model, count=count))
    return _mig_host.converge(params, None, False, False)


@pytest.mark.parametrize("count", [0, 65, True, "2", 2.0, None], ids=["zero", "65", "boolean", "text", "float", "unset"])
def test_offline_count_outside_1_to_64_is_refused(count):
    with pytest.raises(_mig_host.MigError, match=r"offline.count: the number of GPUs must be a whole number from 1 to 64"):
        _offline(count)


def test_offline_count_limits_are_taken_and_planned_gpus_are_predicted():
    result = _offline(64)
    assert len(result["gpus"]) == 64 and result["changed"] and result["nvidia_smi_writes"] == []
    assert [g["mig_mode_current"] for g in _offline(1)["gpus"]] == [True]
    one = _offline(1)["gpus"][0]
    assert [(i["profile"], i["start"]) for i in one["instances"]] == [("7g.80gb", 0)]


@pytest.mark.parametrize("item, message", [
    (dict(profile="3g.40gb", compute_instances=[]), "compute_instances must be a non-empty list"),
    (dict(profile="3g.40gb", compute_instances=2), "compute_instances must be a non-empty list"),
    (dict(profile="  ", compute_instances=[1]), "a profile name such as 3g.40gb is required, got '  '"),
    (dict(compute_instances=[1]), "a profile name such as 3g.40gb is required, got None"),
    (7, "a profile name such as 3g.40gb is required, got 7"),
    ("", "a profile name such as 3g.40gb is required, got ''"),
], ids=["empty split", "split not a list", "blank profile", "no profile", "number", "empty text"])
def test_instance_specs_without_a_profile_or_a_split_are_refused_before_any_call(item, message):
    with pytest.raises(_mig_host.MigError, match="gpus\\[0\\].profiles\\[0\\]: " + re.escape(message)):
        _mig_host.validate_request([dict(gpu="0", profiles=[item])])


def test_a_profile_without_compute_instances_key_takes_the_whole_instance():
    assert _mig_host.validate_request([dict(gpu="0", profiles=[dict(profile="3g.40gb")])])[0]["instances"][0]["compute"] is None


def test_a_failing_nvidia_smi_message_keeps_500_characters_of_its_output():
    def failing(argv):
        return 9, "x" * 600, ""
    with pytest.raises(_mig_host.MigError) as err:
        _mig_host.Smi(failing, "/usr/bin/nvidia-smi")("-L")
    assert str(err.value) == "/usr/bin/nvidia-smi -L failed (rc=9): " + "x" * 500
    assert err.value.details["rc"] == 9
    rc, text = _mig_host.Smi(lambda argv: (6, "none", " found"), "smi")("q", allow_nothing=True)
    assert (rc, text) == (6, "none found")


def test_layouts_of_eight_are_listed_and_longer_ones_counted():
    eight = ["1g.10gb"] * 8
    assert _mig_host._layout_text(eight) == "[%s]" % ", ".join(eight)
    assert _mig_host._layout_text(eight + ["1g.10gb"]) != "[%s]" % ", ".join(eight + ["1g.10gb"])
    assert "9" in _mig_host._layout_text(eight + ["1g.10gb"])


def test_mode_text_and_write_detection():
    assert _mig_host._mode_text(dict(mig_current=True, mig_pending=True)) == "Enabled"
    assert _mig_host._mode_text(dict(mig_current=False, mig_pending=True)) == "Disabled (pending Enabled)"
    assert _mig_host._is_write(["smi", "mig", "-i", "0", "-cgi", "9"]) and _mig_host._is_write(["smi", "-i", "0", "-r"])
    assert not _mig_host._is_write(["smi", "mig", "-lgip"]) and not _mig_host._is_write(["smi", "-L"])


def test_the_result_lists_the_writes_sent_and_nothing_on_a_rerun():
    host = Host("A100-40GB x2")
    result = host.apply([dict(gpu="0", profiles=["7g.40gb"])])
    assert result["nvidia_smi_writes"] == host.writes == ["-i 0 -mig 1", "mig -i 0 -cgi 0:0 -C"]
    assert host.apply([dict(gpu="0", profiles=["7g.40gb"])])["nvidia_smi_writes"] == []


def test_a_request_is_resolved_on_the_gpus_rules_without_another_catalog_lookup(catalog_lookups):
    gpus = _mig_host.offline_host(dict(model="A100-SXM4-40GB", count=2))
    assert catalog_lookups == ["A100-SXM4-40GB"]
    entries = _mig_host.validate_request([dict(gpu="0", layout="all-balanced"), dict(gpu="1", profiles=["4g.20gb", "4g.20gb"])])
    with pytest.raises(_mig_host.MigError) as err:
        _mig_host.resolve(entries, gpus)
    assert str(err.value).endswith("GPU 1 (A100-40GB): layout [4g.20gb, 4g.20gb] does not fit: 2 x 4g.20gb requested, "
                                   "A100-40GB allows at most 1; needs 8 compute slices, A100-40GB has 7; nearest layout that fits: [4g.20gb]")
    assert catalog_lookups == ["A100-SXM4-40GB"]
