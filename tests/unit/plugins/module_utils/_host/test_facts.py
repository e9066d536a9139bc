# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_host_facts engine (plugins/module_utils/_host/facts.py) on captured outputs of several host kinds.

Each host kind is the text its tools print (nvidia-smi, ofed_info) and the files it has under /proc
and /sys (formats: nvidia-stack.md 5.3 and 7.1; sysfs as the kernel's ib_core writes it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpudirect_rdma
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import facts as _gpu_host


QUERY = "--query-gpu=" + ",".join(_gpu_host.GPU_FIELDS)
QUERY_OLD = "--query-gpu=" + ",".join(f for f in _gpu_host.GPU_FIELDS if f != "compute_cap")

H100_ROWS = "".join("%d, GPU-4e1b0d8a-77c3-1b55-9a2e-0c7b5d6a1f%02d, NVIDIA H100 80GB HBM3, 81559, Disabled, Disabled, "
                    "Default, 550.54.14, 9.0\n" % (i, i) for i in range(2))
A100_ROWS = ("0, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77, NVIDIA A100-SXM4-40GB, 40960, Enabled, Enabled, Default, "
             "535.161.08, 8.0\n"
             "1, GPU-0c9e1f52-7b2b-62f9-4a3a-3d8f1a9b6c21, NVIDIA A100-SXM4-40GB, 40960, Disabled, Enabled, "
             "Exclusive_Process, 535.161.08, 8.0\n")
Q_HEADER = ("\n==============NVSMI LOG==============\n\nTimestamp                                 : Mon Nov 23 12:00:00 2026\n"
            "Driver Version                            : %s\nCUDA Version                              : %s\n\n"
            "Attached GPUs                             : 2\n")
OPEN_550 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@U16-I3-B03-4-3)"
            "  Thu Feb 22 01:25:25 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
PROPRIETARY_535 = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024\n"
                   "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n")
MODULES = ("nvidia_peermem 16384 0 - Live 0x0000000000000000\nnvidia_uvm 4956160 4 - Live 0x0000000000000000\n"
           "nvidia 54558720 103 nvidia_uvm,nvidia_peermem, Live 0x0000000000000000\n"
           "mlx5_ib 483328 0 - Live 0x0000000000000000\nib_core 442368 8 nvidia_peermem,mlx5_ib, Live 0x0\n")
IB_PORT = {"state": "4: ACTIVE\n", "link_layer": "InfiniBand\n", "rate": "400 Gb/sec (4X NDR)\n"}


def ib_device(name, netdev, port=None):
    files = {"class/infiniband/%s/ports/1/%s" % (name, key): value for key, value in (port or IB_PORT).items()}
    files["class/infiniband/%s/device/net/%s/ifindex" % (name, netdev)] = "5\n"
    return files


HOSTS = {
    "dgx-h100-open-mofed": dict(
        commands={QUERY: (0, H100_ROWS), "-q": (0, Q_HEADER % ("550.54.14", "12.4")),
                  "-s": (0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n")},
        proc={"driver/nvidia/version": OPEN_550, "modules": MODULES, "sys/kernel/osrelease": "5.15.0-105-generic\n"},
        sys=dict(ib_device("mlx5_0", "ibp24s0"), **ib_device("mlx5_1", "ibp64s0", {
            "state": "1: DOWN\n", "link_layer": "InfiniBand\n", "rate": "10 Gb/sec (4X SDR)\n"})),
        mode="dmabuf", reasons=[]),
    "a100-proprietary-mofed": dict(
        commands={QUERY: (0, A100_ROWS), "-q": (0, Q_HEADER % ("535.161.08", "12.2")),
                  "-s": (0, "MLNX_OFED_LINUX-5.8-3.0.7.0:\n")},
        proc={"driver/nvidia/version": PROPRIETARY_535, "modules": MODULES, "sys/kernel/osrelease": "5.15.0-97-generic\n"},
        sys=ib_device("mlx5_0", "ibp12s0"),
        mode="peermem",
        reasons=["dmabuf: the NVIDIA kernel modules are proprietary; DMA-BUF needs the open kernel modules"]),
    "old-kernel-open-doca": dict(
        commands={QUERY: (0, H100_ROWS), "-q": (0, Q_HEADER % ("550.54.14", "12.4")),
                  "-s": (0, "OFED-internal-24.10-1.1.4:\n")},
        proc={"driver/nvidia/version": OPEN_550, "modules": "nvidia 1 0 - Live 0x0\n",
              "sys/kernel/osrelease": "5.4.0-150-generic\n"},
        sys=ib_device("mlx5_0", "ens1f0np0",
                      {"state": "4: ACTIVE\n", "link_layer": "Ethernet\n", "rate": "100 Gb/sec (4X EDR)\n"}),
        mode="peermem", reasons=["dmabuf: kernel 5.4.0-150-generic is older than 5.12"]),
    "proprietary-no-ofed-old-cuda": dict(
        commands={QUERY: (0, A100_ROWS), "-q": (0, Q_HEADER % ("515.65.01", "11.6"))},
        proc={"driver/nvidia/version": PROPRIETARY_535, "modules": "nvidia 1 0 - Live 0x0\n",
              "sys/kernel/osrelease": "6.8.0-45-generic\n"},
        sys=ib_device("mlx5_0", "ibp12s0"),
        mode="unsupported",
        reasons=["dmabuf: the NVIDIA kernel modules are proprietary; DMA-BUF needs the open kernel modules",
                 "dmabuf: CUDA 11.6 is older than 11.7",
                 "peermem: neither MOFED nor DOCA-OFED is installed (nvidia-peermem needs one)"]),
    "no-gpu": dict(
        commands={QUERY: (6, "No devices were found\n")},
        proc={"modules": "", "sys/kernel/osrelease": "6.8.0-45-generic\n"}, sys={},
        mode="unsupported",
        reasons=["dmabuf: no NVIDIA GPU found", "dmabuf: no RDMA device in /sys/class/infiniband",
                 "dmabuf: the NVIDIA kernel modules are not loaded; DMA-BUF needs the open kernel modules",
                 "dmabuf: CUDA version unknown; DMA-BUF needs CUDA >= 11.7",
                 "peermem: neither MOFED nor DOCA-OFED is installed (nvidia-peermem needs one)"]),
    "driver-not-loaded": dict(
        commands={QUERY: (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
                             "that the latest NVIDIA driver is installed and running.\n")},
        proc={"modules": "", "sys/kernel/osrelease": "6.8.0-45-generic\n"}, sys={}, mode="unsupported", reasons=None),
    "old-driver-no-compute-cap-geforce": dict(
        commands={QUERY: (2, 'Field "compute_cap" is not a valid field to query.\n'),
                  QUERY_OLD: (0, "0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA GeForce RTX 3090, 24576, [N/A], "
                                 "[N/A], Default, 470.82.01\n"),
                  "-q": (0, Q_HEADER % ("470.82.01", "11.4"))},
        proc={"driver/nvidia/version": PROPRIETARY_535, "modules": "", "sys/kernel/osrelease": "5.15.0-1-generic\n"},
        sys={}, mode="unsupported", reasons=None),
}


def write_tree(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def gather(tmp_path, host, nvidia_smi="/usr/bin/nvidia-smi", ofed_info="/usr/bin/ofed_info"):
    calls = []

    def run(argv):
        calls.append(argv)
        key = next((a for a in argv[1:] if a.startswith("--query-gpu=") or a in ("-q", "-s")), None)
        rc, out = host["commands"].get(key, (127, ""))
        return rc, out, ""

    write_tree(tmp_path / "proc", host["proc"])
    write_tree(tmp_path / "sys", host["sys"])
    if "-s" not in host["commands"]:
        ofed_info = None
    facts = _gpu_host.gather(run, nvidia_smi, ofed_info, proc_root=str(tmp_path / "proc"), sys_root=str(tmp_path / "sys"))
    return facts, calls


@pytest.mark.parametrize("kind", sorted(HOSTS))
def test_mode_and_reasons_per_host_kind(tmp_path, kind):
    host = HOSTS[kind]
    facts, _calls = gather(tmp_path, host)
    assert facts["gpudirect_rdma"]["mode"] == host["mode"]
    if host["reasons"] is not None:
        assert facts["gpudirect_rdma"]["reasons"] == host["reasons"]
    modes = facts["gpudirect_rdma"]["modes"]
    assert modes["dmabuf"]["supported"] == (host["mode"] == "dmabuf")
    assert set(facts) >= {"nvidia_smi", "driver_version", "cuda_version", "kernel_version", "kernel_module", "gpus",
                          "modules_loaded", "ofed", "rdma_devices", "gpudirect_rdma", "problems"}


def test_dgx_h100_facts(tmp_path):
    facts, calls = gather(tmp_path, HOSTS["dgx-h100-open-mofed"])
    assert facts["driver_version"] == "550.54.14" and facts["cuda_version"] == "12.4"
    assert facts["kernel_module"] == {"type": "open", "version": "550.54.14"}
    assert facts["kernel_version"] == "5.15.0-105-generic"
    assert facts["gpus"][1] == dict(index=1, uuid="GPU-4e1b0d8a-77c3-1b55-9a2e-0c7b5d6a1f01", name="NVIDIA H100 80GB HBM3",
                                    memory_total_mib=81559, mig_capable=True, mig_mode_current=False,
                                    mig_mode_pending=False, compute_mode="Default", compute_capability="9.0")
    assert facts["modules_loaded"] == {"nvidia_peermem": True, "nvidia_fs": False, "gdrdrv": False, "ib_core": True}
    assert facts["ofed"] == {"present": True, "kind": "mofed", "version": "23.10-1.1.9.0"}
    assert [(d["name"], d["netdevs"], d["state"], d["link_layer"], d["rate_gbps"]) for d in facts["rdma_devices"]] == [
        ("mlx5_0", ["ibp24s0"], "ACTIVE", "InfiniBand", 400), ("mlx5_1", ["ibp64s0"], "DOWN", "InfiniBand", 10)]
    assert facts["problems"] == []
    assert len(calls) == 3  # the GPU table, the CUDA header, ofed_info


def test_pending_mig_mode_is_a_problem(tmp_path):
    facts, _calls = gather(tmp_path, HOSTS["a100-proprietary-mofed"])
    assert [(g["mig_mode_current"], g["mig_mode_pending"]) for g in facts["gpus"]] == [(True, True), (False, True)]
    assert facts["gpus"][1]["compute_mode"] == "Exclusive_Process"
    assert facts["problems"] == ["GPU 1: MIG mode change pending (current Disabled, pending Enabled): a GPU reset or "
                                 "reboot applies it"]


def test_doca_ofed(tmp_path):
    facts, _calls = gather(tmp_path, HOSTS["old-kernel-open-doca"])
    assert facts["ofed"] == {"present": True, "kind": "doca-ofed", "version": "24.10-1.1.4"}
    assert facts["rdma_devices"][0]["link_layer"] == "Ethernet"


def test_no_gpu_and_no_driver_say_so(tmp_path):
    facts, _calls = gather(tmp_path, HOSTS["no-gpu"])
    assert facts["gpus"] == [] and facts["problems"] == ["nvidia-smi found no GPU"]
    assert facts["kernel_module"] == {"type": None, "version": None}
    facts, _calls = gather(tmp_path / "b", HOSTS["driver-not-loaded"])
    assert facts["gpus"] == [] and facts["driver_version"] is None
    assert "couldn't communicate with the NVIDIA driver" in facts["problems"][0]


def test_no_nvidia_smi(tmp_path):
    facts, calls = gather(tmp_path, HOSTS["no-gpu"], nvidia_smi=None)
    assert facts["nvidia_smi"] == {"present": False, "path": None}
    assert facts["problems"] == ["nvidia-smi not found"] and calls == []
    assert facts["gpudirect_rdma"]["mode"] == "unsupported"


def test_old_driver_without_compute_cap_and_a_geforce(tmp_path):
    facts, calls = gather(tmp_path, HOSTS["old-driver-no-compute-cap-geforce"])
    assert len(calls) == 3 and calls[1][1] == QUERY_OLD
    gpu = facts["gpus"][0]
    assert gpu["mig_capable"] is False and gpu["mig_mode_current"] is None and gpu["compute_capability"] is None
    reasons = facts["gpudirect_rdma"]["modes"]["dmabuf"]["reasons"]
    assert "GPU 0 (NVIDIA GeForce RTX 3090) is not a data-center GPU" in reasons
    assert any("compute capability unknown" in r for r in reasons)


def test_unreadable_proc_and_sys(tmp_path):
    facts = _gpu_host.gather(lambda argv: (0, "", ""), None, None, proc_root=str(tmp_path / "none"),
                             sys_root=str(tmp_path / "none"))
    assert facts["kernel_version"] is None and facts["rdma_devices"] == []
    assert "cannot read %s" % (tmp_path / "none" / "modules") in facts["problems"]


# ---- fresh hosts: the GPU Operator will install the driver ------------------------------------------

def pci_device(address, vendor, klass, device):
    return {"bus/pci/devices/%s/%s" % (address, key): value + "\n"
            for key, value in (("vendor", vendor), ("class", klass), ("device", device))}


FRESH_SYS = dict(ib_device("mlx5_0", "ens64np1", {"state": "4: ACTIVE\n", "link_layer": "Ethernet\n",
                                                  "rate": "100 Gb/sec (4X EDR)\n"}),
                 **pci_device("0000:18:00.0", "0x10de", "0x030200", "0x2330"),  # H100 SXM5, no driver bound
                 **pci_device("0000:2a:00.0", "0x10de", "0x030200", "0x2330"),
                 **pci_device("0000:29:00.0", "0x15b3", "0x020000", "0x1021"),  # ConnectX-7
                 **pci_device("0000:00:14.0", "0x8086", "0x0c0330", "0x7ae0"))  # USB controller


def test_fresh_host_facts_show_the_pci_gpus_and_the_rdma_stack(tmp_path):
    host = dict(commands={}, proc={"modules": "mlx5_ib 483328 0 - Live 0x0\nib_core 442368 8 mlx5_ib, Live 0x0\n",
                                   "sys/kernel/osrelease": "6.8.0-45-generic\n"}, sys=FRESH_SYS)
    facts, calls = gather(tmp_path, host, nvidia_smi=None)
    assert calls == [] and facts["gpus"] == [] and facts["kernel_module"]["type"] is None
    assert facts["pci_gpus"] == [{"address": "0000:18:00.0", "device": "0x2330"}, {"address": "0000:2a:00.0", "device": "0x2330"}]
    assert facts["modules_loaded"]["ib_core"] is True and not gpudirect_rdma.driver_loaded(facts)
    assert facts["gpudirect_rdma"]["mode"] == "unsupported"  # what runs now: no driver
    planned = gpudirect_rdma.gpudirect_rdma_planned(facts, "580.105.08")
    assert (planned["mode"], planned["basis"], planned["reasons"]) == ("dmabuf", "planned", [])
    assert planned["evidence"] == [
        "the NVIDIA driver is not installed yet: decided for driver 580.105.08 with the operator's choice of kernel modules",
        "2 NVIDIA GPU(s) on the PCI bus (device 10de:2330)", "RDMA devices mlx5_0", "kernel 6.8.0-45-generic (>= 5.12)"]


# ---- what the mutation check (scripts/mutate.py) showed untested --------------------------------------

ROW = "0, GPU-1, NVIDIA H100 80GB HBM3, 81559, Disabled, Disabled, Default, %s, 9.0"


def _tool(answers):
    """run_tool that answers by the first argument after the binary; records every call."""
    calls = []

    def run(argv):
        calls.append(argv)
        for key, answer in answers:
            if key in argv:
                return answer
        return 127, "", ""
    return run, calls


def test_an_nvidia_smi_failure_keeps_300_characters():
    run, _calls = _tool([(QUERY, (9, "x" * 400, None))])
    assert _gpu_host.gather_gpus(run, "smi") == ([], None, None, ["nvidia-smi failed (rc=9): " + "x" * 300])


@pytest.mark.parametrize("rc", [1, 2, 6])
def test_a_driver_without_compute_cap_is_asked_again_whatever_its_exit_code(rc):
    old_row = "0, GPU-1, Tesla V100-SXM2-16GB, 16160, [N/A], [N/A], Default, 470.57.02"
    run, calls = _tool([(QUERY, (rc, None, 'Field "compute_cap" is not a valid field to query.')),
                        (QUERY_OLD, (0, old_row + "\n", "")), ("-q", (0, "CUDA Version : 11.4\n", ""))])
    gpus, driver, cuda, problems = _gpu_host.gather_gpus(run, "smi")
    assert [c[1] for c in calls[:2]] == [QUERY, QUERY_OLD]
    assert (gpus[0]["name"], driver, cuda, problems) == ("Tesla V100-SXM2-16GB", "470.57.02", "11.4", [])


def test_two_driver_versions_and_no_cuda_version_are_problems():
    run, _calls = _tool([(QUERY, (0, "\n".join([ROW % "550.54.14", ROW.replace("0, GPU-1", "1, GPU-2") % "550.54.15"]), "")),
                         ("-q", (0, "CUDA Version : N/A\n", ""))])
    gpus, driver, cuda, problems = _gpu_host.gather_gpus(run, "smi")
    assert len(gpus) == 2 and cuda is None
    assert problems == ["GPUs report different driver versions: 550.54.14, 550.54.15",
                        "nvidia-smi -q did not report a CUDA version"]
    run, _calls = _tool([(QUERY, (0, "\n".join([ROW % "550.54.14"] * 2), "")), ("-q", (3, "CUDA Version : 12.4\n", ""))])
    assert _gpu_host.gather_gpus(run, "smi")[1:] == ("550.54.14", None, ["nvidia-smi -q did not report a CUDA version"])


@pytest.mark.parametrize("rc, out, expected", [
    (0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n", dict(present=True, kind="mofed", version="23.10-1.1.9.0")),
    (0, "OFED-internal-24.10-1.1.4:\n", dict(present=True, kind="doca-ofed", version="24.10-1.1.4")),
    (1, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n", dict(present=False, kind=None, version=None)),
    (0, "command not found\n", dict(present=False, kind=None, version=None)),
    (0, None, dict(present=False, kind=None, version=None)),
], ids=["mofed", "doca", "failing ofed_info", "no version", "no output"])
def test_ofed_info_answers(rc, out, expected):
    run, calls = _tool([("-s", (rc, out, ""))])
    assert _gpu_host.ofed(run, "/usr/bin/ofed_info") == expected and calls == [["/usr/bin/ofed_info", "-s"]]
    assert _gpu_host.ofed(run, None) == dict(present=False, kind=None, version=None) and len(calls) == 1


class _Context:
    def __init__(self, params, paths=None):
        self.params, self.paths, self.calls = params, dict(paths or {}), []

    def get_bin_path(self, name, opt_dirs=None):
        return self.paths.get(name)

    def run_command(self, argv, environ_update=None):
        self.calls.append((argv, environ_update))
        return 127, "", ""


def test_the_module_entry_checks_its_folders_and_finds_its_tools(tmp_path):
    params = dict(procfs_root=str(tmp_path), sysfs_root=str(tmp_path / "missing"), nvidia_smi=None, ofed_info=None)
    with pytest.raises(_gpu_host.EngineError, match="sysfs_root: .*missing is not a folder \\(where sysfs is mounted\\)"):
        _gpu_host.run(params, _Context(params))
    (tmp_path / "missing").mkdir()
    result = _gpu_host.run(params, _Context(params))
    assert result["changed"] is False and result["ansible_facts"]["gpu_host"]["problems"][0] == "nvidia-smi not found"
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o644)  # given but not executable: as good as absent
    facts = _gpu_host.run(dict(params, nvidia_smi=str(tool)), _Context(params))["ansible_facts"]["gpu_host"]
    assert facts["nvidia_smi"] == {"present": False, "path": None}
    tool.chmod(0o755)
    context = _Context(params)
    facts = _gpu_host.run(dict(params, nvidia_smi=str(tool)), context)["ansible_facts"]["gpu_host"]
    assert facts["nvidia_smi"] == {"present": True, "path": str(tool)}
    assert context.calls and all(env == {"LC_ALL": "C"} for _argv, env in context.calls)
    found = _Context(params, {"nvidia-smi": "/usr/bin/nvidia-smi"})
    assert _gpu_host.run(params, found)["ansible_facts"]["gpu_host"]["nvidia_smi"]["path"] == "/usr/bin/nvidia-smi"


# ---- the host nvidia-imex.service (systemctl show), through the strict fake systemctl ------------------------------

FAKE_SYSTEMCTL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fakes", "systemctl")


def _systemctl(units):
    env = dict(os.environ)
    env.pop("FAKE_SYSTEMCTL_UNITS", None)
    if units is not None:
        env["FAKE_SYSTEMCTL_UNITS"] = json.dumps(units)
    calls = []

    def run(argv):
        calls.append(argv)
        done = subprocess.run([sys.executable] + argv, env=env, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr
    return run, calls


@pytest.mark.parametrize("units,expected", [
    ({"nvidia-imex.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}},
     dict(present=True, active=True, state="active", enabled="enabled", error=None)),
    ({"nvidia-imex.service": {"LoadState": "masked", "ActiveState": "inactive", "UnitFileState": "masked"}},
     dict(present=True, active=False, state="inactive", enabled="masked", error=None)),
    ({"nvidia-imex.service": {"LoadState": "loaded", "ActiveState": "failed", "UnitFileState": "enabled"}},
     dict(present=True, active=False, state="failed", enabled="enabled", error=None)),
    ({}, dict(present=False, active=False, state=None, enabled=None, error=None)),
], ids=["active", "masked", "failed", "not installed"])
def test_the_host_imex_service(units, expected):
    run, calls = _systemctl(units)
    assert _gpu_host.imex_service(run, FAKE_SYSTEMCTL) == expected
    assert calls == [[FAKE_SYSTEMCTL, "show", "nvidia-imex.service", "--property=LoadState,ActiveState,UnitFileState"]]


def test_the_host_imex_service_unknown_without_systemd():
    run, calls = _systemctl(None)
    facts = _gpu_host.imex_service(run, FAKE_SYSTEMCTL)
    assert facts["present"] is None and facts["active"] is None and facts["state"] is None
    assert facts["error"].startswith("systemctl show failed (rc 1): System has not been booted with systemd")
    assert _gpu_host.imex_service(run, None) == dict(present=None, active=None, state=None, enabled=None,
                                                     error="systemctl not found") and len(calls) == 1


def test_gather_reports_the_host_imex_service(tmp_path):
    run, _calls = _systemctl({"nvidia-imex.service": {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}})
    host = HOSTS["dgx-h100-open-mofed"]
    write_tree(tmp_path / "proc", host["proc"])
    write_tree(tmp_path / "sys", host["sys"])
    facts = _gpu_host.gather(run, None, None, proc_root=str(tmp_path / "proc"), sys_root=str(tmp_path / "sys"),
                             systemctl=FAKE_SYSTEMCTL)
    assert facts["nvidia_imex"]["active"] is True
    assert facts["problems"] == ["nvidia-smi not found"]
    context = _Context(dict(procfs_root=str(tmp_path / "proc"), sysfs_root=str(tmp_path / "sys"), nvidia_smi=None,
                            ofed_info=None, systemctl=None), {"systemctl": "/usr/bin/systemctl"})
    _gpu_host.run(context.params, context)
    assert [argv for argv, _env in context.calls] == [
        ["/usr/bin/systemctl", "show", "nvidia-imex.service", "--property=LoadState,ActiveState,UnitFileState"]]


def test_the_host_imex_service_odd_answers():
    def answer(rc, out, err=""):
        return lambda argv: (rc, out, err)
    # a value that holds "=" stays whole
    facts = _gpu_host.imex_service(answer(0, "LoadState=loaded\nActiveState=active\nUnitFileState=en=abled\n"), "/bin/systemctl")
    assert facts["enabled"] == "en=abled" and facts["active"] is True
    # exit 0 without the properties (an answer systemctl never gives for a unit) is no answer
    facts = _gpu_host.imex_service(answer(0, "", ""), "/bin/systemctl")
    assert facts["present"] is None and facts["error"] == "systemctl show failed (rc 0): "
    # the reason is cut at 300 characters
    facts = _gpu_host.imex_service(answer(1, "", "x" * 400), "/bin/systemctl")
    assert facts["error"] == "systemctl show failed (rc 1): " + "x" * 300
