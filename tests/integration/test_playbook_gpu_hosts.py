# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/gpu_hosts.yml and the modules gpu_host_facts / mig_profile run by ansible-playbook against the
strict fake nvidia-smi (tests/fakes): apply, re-apply, change, check mode, invalid layouts, render mode."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake

from .conftest import REPO_ROOT

FAKE = str(REPO_ROOT / "tests" / "fakes" / "nvidia-smi")
PLAYBOOK = REPO_ROOT / "playbooks" / "gpu_hosts.yml"
LAYOUT = [{"gpu": "all", "profiles": ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]}]


class FakeHost:
    """The fake's state and call log for one test."""

    def __init__(self, folder, preset):
        self.state_file, self.log_file = folder / "nvidia-smi.json", folder / "nvidia-smi.log"
        self.state_file.write_text(json.dumps(fake.preset_state(preset)), encoding="utf-8")
        self.env = {"FAKE_NVIDIA_SMI_STATE": str(self.state_file), "FAKE_NVIDIA_SMI_LOG": str(self.log_file)}

    @property
    def state(self):
        return json.loads(self.state_file.read_text(encoding="utf-8"))

    def calls(self):
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text(encoding="utf-8").splitlines()]

    def writes(self):
        return [" ".join(c["argv"]) for c in self.calls() if c["write"]]

    def reset_log(self):
        if self.log_file.exists():
            self.log_file.unlink()

    def geometry(self, index):
        return sorted((gi["profile"], gi["start"]) for gi in self.state["gpus"][index]["gpu_instances"])


@pytest.fixture
def host(tmp_path):
    return FakeHost(tmp_path, "A100-40GB x2")


def _vars(tmp_path, mig, **more):
    values = dict(gpu_hosts_target="localhost", gpu_hosts_become=False, gpu_hosts_nvidia_smi=FAKE,
                  gpu_hosts_mig=mig, gpu_hosts_mig_allow_reset=True, gpu_hosts_nccl_fabric="ib",
                  gpu_hosts_nccl_interfaces=["mlx5_0"], gpu_hosts_nccl_dest=str(tmp_path / "nccl.conf"))
    values.update(more)
    return values


def test_apply_reapply_change_check_mode(run_playbook, host, tmp_path):
    first = run_playbook(PLAYBOOK, extra_vars=_vars(tmp_path, LAYOUT), env=host.env).assert_ok()
    facts = first.task("Read the GPU host")["result"]["ansible_facts"]["gpu_host"]
    assert [(g["name"], g["mig_mode_current"]) for g in facts["gpus"]] == [("NVIDIA A100-SXM4-40GB", False)] * 2
    assert facts["driver_version"] == "550.54.14" and facts["cuda_version"] == "12.4"
    mig = first.task("Apply the MIG geometry")
    assert mig["changed"] and len(mig["result"]["mig_devices"]) == 8
    for index in (0, 1):
        assert host.geometry(index) == [("1g.5gb", 2), ("1g.5gb", 3), ("2g.10gb", 0), ("3g.20gb", 4)]
    listed = _nvsmi.mig_devices(fake.run(["-L"], host.state)[1])
    assert sorted(d["uuid"] for d in listed) == sorted(mig["result"]["mig_devices"])
    assert "NCCL_IB_HCA==mlx5_0" in (tmp_path / "nccl.conf").read_text(encoding="utf-8")

    host.reset_log()
    again = run_playbook(PLAYBOOK, extra_vars=_vars(tmp_path, LAYOUT), env=host.env).assert_ok()
    assert again.changed == [] and host.writes() == []

    change = LAYOUT + [{"gpu": "1", "layout": "all-3g.20gb"}]
    host.reset_log()
    checked = run_playbook(PLAYBOOK, extra_vars=_vars(tmp_path, change), env=host.env, check=True, diff=True).assert_ok()
    planned = checked.task("Apply the MIG geometry")
    assert planned["changed"] and host.writes() == []
    assert sorted((c["action"], c["name"]) for c in planned["result"]["changes"]) == [
        ("create", "gpu1/3g.20gb@0 [3]"), ("delete", "gpu1/1g.5gb@2 [1]"), ("delete", "gpu1/1g.5gb@3 [1]"),
        ("delete", "gpu1/2g.10gb@0 [2]")]
    assert "gpu1/3g.20gb@0" in checked.stdout  # the --diff output

    host.reset_log()
    changed = run_playbook(PLAYBOOK, extra_vars=_vars(tmp_path, change), env=host.env).assert_ok()
    assert changed.task("Apply the MIG geometry")["changed"]
    assert host.geometry(1) == [("3g.20gb", 0), ("3g.20gb", 4)]
    assert host.geometry(0) == [("1g.5gb", 2), ("1g.5gb", 3), ("2g.10gb", 0), ("3g.20gb", 4)]
    assert all(w.startswith("mig -i 1 ") for w in host.writes()), host.writes()


# at least 15 layouts nvidia-smi must never see; each message names the GPU and the profile
INVALID = [
    ([{"gpu": "0", "profiles": ["3g.40gb"]}], "GPU 0 (A100-40GB), profile 3g.40gb does not exist on A100-40GB"),
    ([{"gpu": "0", "profiles": ["1g.5gb"] * 8}], "8 x 1g.5gb requested, A100-40GB allows at most 7"),
    ([{"gpu": "1", "profiles": ["4g.20gb", "4g.20gb"]}], "GPU 1 (A100-40GB): layout [4g.20gb, 4g.20gb]"),
    ([{"gpu": "0", "profiles": ["7g.40gb", "1g.5gb"]}], "nearest layout that fits: [7g.40gb]"),
    ([{"gpu": "0", "profiles": ["1g.5gb+me", "1g.5gb+me"]}], "media extensions"),
    ([{"gpu": "0", "profiles": ["3g.20gb", "3g.20gb", "1g.5gb"]}], "GPU 0 (A100-40GB): layout [3g.20gb, 3g.20gb, 1g.5gb]"),
    ([{"gpu": "0", "profiles": ["2g.10gb"] * 4}], "4 x 2g.10gb requested"),
    ([{"gpu": "0", "profiles": ["2g.10gb@6"]}], "2g.10gb cannot start at slot 6"),
    ([{"gpu": "0", "profiles": ["3g.20gb@0", "4g.20gb@0"]}], "no non-overlapping placement"),
    ([{"gpu": "0", "layout": "all-3g.40gb"}], "GPU 0 (A100-40GB) has no layout 'all-3g.40gb'"),
    ([{"gpu": "0", "profiles": [{"profile": "2g.10gb", "compute_instances": [3]}]}],
     "GPU 0 (A100-40GB), profile 2g.10gb: a 3-slice compute instance does not fit"),
    ([{"gpu": "0", "profiles": [{"profile": "7g.40gb", "compute_instances": [4, 4]}]}], "profile 7g.40gb: compute instances of 4+4"),
    ([{"gpu": "5", "profiles": ["7g.40gb"]}], "no GPU 5 on this host"),
    ([{"gpu": "0", "profiles": ["1g.10gb"] * 4 + ["1g.5gb"]}], "GPU 0 (A100-40GB): layout"),
    ([{"gpu": "0", "profiles": ["huge"]}], "'huge' is not a MIG profile name"),
    ([{"gpu": "all", "profiles": ["7g.40gb"]}, {"gpu": "1", "profiles": ["1g.5gb"] * 7 + ["1g.5gb+me"]}],
     "GPU 1 (A100-40GB): layout"),
]


def test_invalid_layouts_are_refused_before_any_write(run_playbook, host):
    tasks = [{"name": "Layout %02d" % number, "ignore_errors": True,
              "gpu_ops.cluster.mig_profile": {"gpus": gpus, "nvidia_smi": FAKE, "allow_reset": True}}
             for number, (gpus, _message) in enumerate(INVALID)]
    result = run_playbook([{"name": "invalid layouts", "hosts": "localhost", "gather_facts": False, "tasks": tasks}],
                          env=host.env)
    assert result.rc == 0, result.output
    for number, (_gpus, message) in enumerate(INVALID):
        record = result.task("Layout %02d" % number)
        assert record["status"] == "ignored" and message in record["result"]["msg"], (number, record["result"]["msg"])
    assert len(host.calls()) > 0 and host.writes() == []
    assert host.geometry(0) == [] and host.state["gpus"][0]["mig_current"] == "Disabled"


def test_gpu_in_use_reports_reboot_required(run_playbook, host, tmp_path):
    fake.control(["process", "add", "0", "31337", "train.py"], state := host.state)
    host.state_file.write_text(json.dumps(state), encoding="utf-8")
    result = run_playbook(PLAYBOOK, extra_vars=_vars(tmp_path, LAYOUT), env=host.env).assert_ok()
    mig = result.task("Apply the MIG geometry")["result"]
    assert mig["reboot_required"] and mig["pending"][0]["processes"] == [{"pid": 31337, "name": "train.py"}]
    assert "MIG mode change pending on localhost" in result.output
    assert "-i 0 -r" not in host.writes() and host.geometry(0) == [] and len(host.geometry(1)) == 4


FACTS_CASES = [
    ("none", {}, dict(gpus=[], problems=["nvidia-smi found no GPU"])),
    ("no-driver", {}, dict(gpus=[], driver_version=None)),
    ("H100-80GB", {"nvidia_smi": "/nonexistent/nvidia-smi"}, dict(nvidia_smi={"present": False, "path": None})),
    ("L4", {}, dict(gpus=[{"index": 0, "uuid": "GPU-00050000-1111-2222-3333-444455556600", "name": "NVIDIA L4",
                           "memory_total_mib": 23034, "mig_capable": False, "mig_mode_current": None,
                           "mig_mode_pending": None, "compute_mode": "Default", "compute_capability": "8.9"}])),
]


def test_facts_of_hosts_without_usable_gpus(run_playbook, tmp_path):
    tasks = []
    for number, (preset, options, _expected) in enumerate(FACTS_CASES):
        folder = tmp_path / ("host-%d" % number)
        (folder / "proc" / "sys" / "kernel").mkdir(parents=True)
        (folder / "sys").mkdir()
        (folder / "proc" / "modules").write_text("", encoding="utf-8")
        (folder / "proc" / "sys" / "kernel" / "osrelease").write_text("6.8.0-45-generic\n", encoding="utf-8")
        options = dict({"nvidia_smi": FAKE, "procfs_root": str(folder / "proc"), "sysfs_root": str(folder / "sys")},
                       **options)
        tasks.append({"name": "Read %d" % number, "gpu_ops.cluster.gpu_host_facts": options,
                      "environment": FakeHost(folder, preset).env})
    result = run_playbook([{"name": "facts", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]).assert_ok()
    for number, (_preset, _options, expected) in enumerate(FACTS_CASES):
        facts = result.task("Read %d" % number)["result"]["ansible_facts"]["gpu_host"]
        assert facts["kernel_version"] == "6.8.0-45-generic"
        for key, value in expected.items():
            assert facts[key] == value, (number, key, facts)
        assert facts["gpudirect_rdma"]["mode"] == "unsupported" and facts["gpudirect_rdma"]["reasons"]


# table-driven bad input of both modules: refused with the option named, nothing written
BAD_INPUT = [
    ("mig_profile", {"gpus": [{"gpu": "0"}]}, "one of the following is required: profiles, layout"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": "all-balanced", "profiles": []}]}, "mutually exclusive"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": "all-balanced"}], "allow_reset": "maybe"}, "allow_reset"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": "all-balanced"}], "offline": {"model": "H100-80GB", "count": 0}},
     "offline.count: the number of GPUs must be a whole number from 1 to 64"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": "all-balanced"}], "offline": {"model": "T4", "count": 1}},
     "offline.model: unknown GPU model 'T4'"),
    ("mig_profile", {"gpus": []}, "gpus: at least one entry"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": "all-balanced", "size": 3}]}, "size"),
    ("mig_profile", {"gpus": [{"gpu": "0", "layout": ["all-balanced"]}]}, "has no layout"),
    ("gpu_host_facts", {"procfs_root": "/nonexistent/proc"}, "procfs_root: /nonexistent/proc is not a folder"),
    ("gpu_host_facts", {"sysfs_root": "/nonexistent/sys"}, "sysfs_root: /nonexistent/sys is not a folder"),
    ("gpu_host_facts", {"nvidia-smi": "/usr/bin/nvidia-smi"}, "Supported parameters include"),
]


def test_bad_input_of_both_modules(run_playbook, host):
    tasks = [{"name": "Bad %02d" % number, "gpu_ops.cluster." + module: dict(
        {"nvidia_smi": FAKE} if module == "mig_profile" else {}, **args), "ignore_errors": True}
        for number, (module, args, _message) in enumerate(BAD_INPUT)]
    result = run_playbook([{"name": "bad", "hosts": "localhost", "gather_facts": False, "tasks": tasks}], env=host.env)
    assert result.rc == 0, result.output
    for number, (_module, _args, message) in enumerate(BAD_INPUT):
        record = result.task("Bad %02d" % number)
        assert record["status"] == "ignored" and message in record["result"]["msg"], (number, record["result"])
    # shape errors stop before nvidia-smi runs; a layout name is only known unknown after reading the GPU model
    assert host.writes() == [] and len(host.calls()) <= 2


def test_render_mode_plans_every_inventory_host_without_a_gpu(run_playbook, tmp_path):
    out = tmp_path / "rendered"
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(out)},
                          extra_args=("-i", str(REPO_ROOT / "inventories" / "baremetal"))).assert_ok()
    assert {r["status"] for r in result.tasks("Read the GPU host")} == {"skipped"}
    folder = out / "checks" / "gpu_hosts"
    assert sorted(p.name for p in folder.iterdir()) == ["dgx-a100-01", "hgx-h100-01", "hgx-h200-01"]
    parted = yaml.safe_load((folder / "hgx-h100-01" / "mig-parted.yaml").read_text(encoding="utf-8"))
    entries = parted["mig-configs"]["hgx-h100-01"]
    assert [e["devices"] for e in entries] == [[0, 1, 2, 3, 4, 5, 6], [7]]
    assert entries[1]["mig-devices"] == {"1c.3g.40gb": 3, "4g.40gb": 1}  # the 3g split into three compute instances
    plan = json.loads((folder / "dgx-a100-01" / "mig-plan.json").read_text(encoding="utf-8"))
    assert [i["profile"] for i in plan["gpus"][0]["instances"]] == ["2g.10gb", "1g.5gb", "1g.5gb", "3g.20gb"]
    assert plan["gpus"][4]["mig_mode_current"] is False
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3" in (folder / "hgx-h200-01" / "nccl.conf").read_text(encoding="utf-8")
    # MPS only where the inventory opts in, with the daemon environment the unit would carry
    assert [h for h in ("dgx-a100-01", "hgx-h100-01", "hgx-h200-01") if (folder / h / "mps.json").exists()] == ["dgx-a100-01"]
    mps = json.loads((folder / "dgx-a100-01" / "mps.json").read_text(encoding="utf-8"))
    assert mps["environment"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert mps["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "4=16G,5=16G"
    assert mps["environment"]["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_bad_nccl_and_mig_values_fail_in_the_preflight_before_the_first_nvidia_smi_write(run_playbook, host, tmp_path):
    # a valid geometry with a bad NCCL override: before, the geometry was applied (10 nvidia-smi writes) and nccl_env
    # failed after it; a layout GPU 1 cannot hold fails beside it, both in one report
    bad = _vars(tmp_path, LAYOUT + [{"gpu": "1", "profiles": ["4g.20gb", "4g.20gb"]}],
                gpu_hosts_nccl_overrides={"NCCL_IB_HCA": "mlx5_0\nNCCL_DEBUG=TRACE"})
    result = run_playbook(PLAYBOOK, extra_vars=bad, env=host.env).assert_failed()
    report = [r for r in result.failed if "report every problem" in r["task"]][0]["result"]["msg"]
    assert report.startswith("Preflight of playbooks/gpu_hosts.yml found 2 problem(s); nothing was changed"), report
    assert "gpu_hosts_mig: " in report and "GPU 1 (A100-40GB): layout [4g.20gb, 4g.20gb]" in report, report
    assert "gpu_hosts_nccl_<option>: " in report and "overrides" in report, report
    assert host.writes() == [] and host.geometry(0) == [] and not (tmp_path / "nccl.conf").exists()
    assert result.tasks("Apply the MIG geometry") == []
