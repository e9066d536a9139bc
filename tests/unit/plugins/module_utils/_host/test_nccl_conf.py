# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_env engine (plugins/module_utils/_host/nccl_conf.py): the catalog's NCCL environments and the
nccl.conf it manages.

The engine runs through the nccl_env module's main(), unchanged; only exit_json/fail_json are turned into
exceptions so that the result can be read. Files are real files in a temporary folder. The module's own
argument spec is tested in tests/unit/plugins/modules/test_nccl_env.py.
"""

from __future__ import annotations

import copy
import os
import stat

import pytest

from ansible.module_utils import basic
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.modules import nccl_env


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg") or "exit")
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs.update(failed=True, msg=msg)
    raise ModuleExit(kwargs)


@pytest.fixture
def run(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def _run(args, check=False, diff=False):
        args = copy.deepcopy(args)
        if check:
            args["_ansible_check_mode"] = True
        if diff:
            args["_ansible_diff"] = True
        with patch_module_args(args):
            try:
                nccl_env.main()
            except ModuleExit as exc:
                return exc.result
        raise AssertionError("the module returned without exit_json/fail_json")

    return _run


def env_of(result):
    return result["env"]


# ------------------------------------------------------------------ fabrics

def test_tcpx_classic_is_the_guides_set(run):
    result = run(dict(fabric="tcpx", gke_version="1.30.4-gke.1129000"))
    env = env_of(result)
    assert not result["changed"] and result["variant"] == "classic"
    # values of the guide's "recommended NCCL configuration" for GPUDirect-TCPX
    assert env["NCCL_ALGO"] == "Ring"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == "eth0"
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] == \
        "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
    assert env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"] == \
        "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
    assert env["NCCL_BUFFSIZE"] == "4194304"
    assert result["nccl_warnings"] == []


def test_tcpx_on_gke_134_uses_the_slim_set(run):
    classic = env_of(run(dict(fabric="tcpx", gke_version="1.33.5-gke.1000000")))
    result = run(dict(fabric="tcpx", gke_version="v1.34.1-gke.1829001"))
    slim = env_of(result)
    assert result["variant"] == "devmem"
    assert slim["NCCL_ALGO"] == "Ring,Tree"
    assert "NCCL_NVLS_ENABLE" not in slim
    assert set(classic) - set(slim) == {"NCCL_NVLS_ENABLE"}
    assert {k for k in slim if slim[k] != classic.get(k)} == {"NCCL_ALGO"}


def test_tcpx_without_gke_version_warns_and_uses_the_baseline(run):
    result = run(dict(fabric="tcpx"))
    assert result["variant"] == "classic"
    assert any("gke_version not given" in w for w in result["nccl_warnings"])


def test_tcpxo_environment(run):
    result = run(dict(fabric="tcpxo", gke_version="1.32.2-gke.1489001"))
    env = env_of(result)
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join("eth%d" % i for i in range(1, 9))
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert env["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "131072"
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/nvidia/lib64/a3plus_tuner_config.textproto"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert "NCCL_ALGO" not in env and "NCCL_NVLS_ENABLE" not in env
    assert result["nccl_warnings"] == []


@pytest.mark.parametrize("machine_type, tuner", [
    ("a3-ultragpu-8g", "/usr/local/gib/configs/tuner_config_a3u.txtpb"),
    ("a4-highgpu-8g", "/usr/local/gib/configs/tuner_config_a4.txtpb"),
])
def test_rdma_gib_environment_per_machine(run, machine_type, tuner):
    result = run(dict(fabric="rdma", machine_type=machine_type))
    env = env_of(result)
    assert env["NCCL_NET"] == "gIB"
    assert env["NCCL_TUNER_CONFIG_PATH"] == tuner
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert result["nccl_warnings"] == []


def test_rdma_without_machine_type_warns(run):
    result = run(dict(fabric="rdma"))
    assert any("machine_type not given" in w for w in result["nccl_warnings"])


def test_ib_and_roce_use_exact_hca_names(run):
    ib = env_of(run(dict(fabric="ib", interfaces=["mlx5_0", "mlx5_1"], ctrl_interface="ib0")))
    assert ib == {"NCCL_NET": "IB", "NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1",
                  "NCCL_SOCKET_IFNAME": "ib0"}
    roce = env_of(run(dict(fabric="roce", interfaces=["mlx5_2"])))
    assert roce["NCCL_IB_GID_INDEX"] == "3" and roce["NCCL_IB_HCA"] == "=mlx5_2"
    assert "NCCL_SOCKET_IFNAME" not in roce


def test_socket_fallback(run):
    env = env_of(run(dict(fabric="socket", interfaces=["eth0", "eth1"])))
    assert env == {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0,eth1"}


def test_outputs_agree(run):
    result = run(dict(fabric="tcpx", gke_version="1.34"))
    env = result["env"]
    assert result["k8s_env"] == [dict(name=k, value=v) for k, v in env.items()]
    lines = result["exports"].splitlines()
    assert len(lines) == len(env)
    assert 'export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}"/usr/local/nvidia/lib64' in lines
    assert "export NCCL_GPUDIRECTTCPX_TX_BINDINGS='%s'" % env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] in lines
    conf = result["nccl_conf"].splitlines()
    assert "LD_LIBRARY_PATH" not in result["nccl_conf"]
    assert [line for line in conf if not line.startswith("#")] == \
        ["%s=%s" % (k, v) for k, v in env.items() if k.startswith("NCCL_")]


def test_custom_interfaces_for_host_network(run):
    names = ["enp6s0", "enp12s0", "enp134s0", "enp140s0"]
    env = env_of(run(dict(fabric="tcpx", gke_version="1.30.4-gke.1129000", interfaces=names, ctrl_interface="enp0s12")))
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == ",".join(names)
    assert env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"].startswith("enp6s0:8-21,112-125;enp12s0:8-21,112-125;")


# ------------------------------------------------------------------ overrides

def test_overrides_replace_add_and_remove(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS=None, NCCL_BUFFSIZE=4194304)))
    env = env_of(result)
    assert env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_DEBUG_SUBSYS" not in env
    assert env["NCCL_BUFFSIZE"] == "4194304"
    assert result["nccl_warnings"] == []


def test_unknown_nccl_key_warns(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_BUFSIZE="1", GLOO_SOCKET_IFNAME="eth0")))
    assert result["env"]["NCCL_BUFSIZE"] == "1"
    assert result["env"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert result["nccl_warnings"] == ["overrides.NCCL_BUFSIZE: not a known NCCL variable (check the spelling)"]


def test_other_fabrics_plugin_key_warns(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_GPUDIRECTTCPX_FORCE_ACK="0")))
    assert any("belongs to the tcpx plugin" in w for w in result["nccl_warnings"])


def test_keys_dropped_for_gke_134_warn(run):
    result = run(dict(fabric="tcpx", gke_version="1.34.1-gke.1829001",
                      overrides=dict(NCCL_GPUDIRECTTCPX_FORCE_ACK="0", NCCL_MAX_NCHANNELS="8")))
    warnings = result["nccl_warnings"]
    assert any("FORCE_ACK: ignored by tcpx-daemon v2.0.15" in w for w in warnings)
    assert any("NCCL_MAX_NCHANNELS: dropped from the recommended TCPX set" in w for w in warnings)
    quiet = run(dict(fabric="tcpx", gke_version="1.33", overrides=dict(NCCL_MAX_NCHANNELS="8")))
    assert quiet["nccl_warnings"] == []


def test_tcpxo_guest_config_checker_refuses_nvlstree_chunksize(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_NVLSTREE_MAX_CHUNKSIZE=262144)))
    assert result["failed"]
    assert "overrides.NCCL_NVLSTREE_MAX_CHUNKSIZE" in result["msg"] and "131072" in result["msg"]
    same = run(dict(fabric="tcpxo", overrides=dict(NCCL_NVLSTREE_MAX_CHUNKSIZE="131072")))
    assert not same.get("failed") and same["nccl_warnings"] == []


def test_tcpxo_guest_config_checker_watched_keys_warn(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_ALGO="Ring", NCCL_PROTO="Simple")))
    warnings = result["nccl_warnings"]
    assert any(w.startswith("overrides.NCCL_ALGO:") and "unexpected" in w for w in warnings)
    assert any(w.startswith("overrides.NCCL_PROTO:") for w in warnings)


def test_interface_override_conflict_warns(run):
    result = run(dict(fabric="tcpx", gke_version="1.34", overrides=dict(NCCL_GPUDIRECTTCPX_SOCKET_IFNAME="eth1,eth2")))
    assert any("differs from the interfaces eth1,eth2,eth3,eth4" in w for w in result["nccl_warnings"])


def test_nccl_net_override_on_gpudirect_warns(run):
    result = run(dict(fabric="tcpxo", overrides=dict(NCCL_NET="Socket")))
    assert any("bypasses the GPUDirect-TCPXO" in w for w in result["nccl_warnings"])


# ------------------------------------------------------------------ input errors

@pytest.mark.parametrize("args, message", [
    (dict(fabric="tcpx", machine_type="a3-megagpu-8g"), "machine_type: machine type 'a3-megagpu-8g' does not run tcpx"),
    (dict(fabric="tcpxo", interfaces=["eth1", "eth2"]), "interfaces: tcpxo has 8 GPU NICs, 2 given"),
    (dict(fabric="tcpx", interfaces=["eth1", "eth1", "eth2", "eth3"]), "interfaces: names repeat"),
    (dict(fabric="tcpx", gke_version="latest"), "not a GKE version"),
    (dict(fabric="tcpx", overrides={"NCCL X": "1"}), "overrides: 'NCCL X' is not an environment variable name"),
    (dict(fabric="tcpx", overrides={"NCCL_DEBUG": "INFO\nNCCL_X=1"}), "overrides.NCCL_DEBUG: the value must be one line"),
    (dict(fabric="tcpx", ctrl_interface="eth1"), "ctrl_interface: eth1 is also a GPU interface"),
    # interface names: the kernel's 15-byte limit, no shell or list metacharacters
    (dict(fabric="socket", ctrl_interface="eth0;reboot"), "ctrl_interface: 'eth0;reboot' is not 1 to 15 letters"),
    (dict(fabric="tcpxo", ctrl_interface="eth0 eth9"), "ctrl_interface: 'eth0 eth9' is not 1 to 15 letters"),
    (dict(fabric="tcpx", ctrl_interface="=eth0"), "ctrl_interface: '=eth0' is not 1 to 15 letters"),
    (dict(fabric="socket", interfaces=["enp1s0f0np0-long1"]), "interfaces: 'enp1s0f0np0-long1' is not 1 to 15"),
    (dict(fabric="socket", interfaces=["eth0", "^lo"]), "interfaces: '^lo' is not 1 to 15"),
    (dict(fabric="socket", interfaces=["$(id)"]), "interfaces: '$(id)' is not 1 to 15"),
    (dict(fabric="tcpx", interfaces=["eth1", "eth2", "eth3", "eth4:1"]), "interfaces: 'eth4:1' is not 1 to 15"),
    (dict(fabric="tcpx", interfaces=["eth1", "eth2", "eth3", ".."]), "interfaces: '..' is not 1 to 15"),
    (dict(fabric="ib", interfaces=["=mlx5_0"]), "interfaces: '=mlx5_0' is not an HCA name"),
    (dict(fabric="roce", interfaces=["mlx5_0:port1"]), "interfaces: 'mlx5_0:port1' is not an HCA name"),
    # version floors of the GPUDirect fabrics (the gke_gpudirect catalog's min_versions)
    (dict(fabric="tcpx", gke_version="1.26"), "gke_version: GKE 1.26 is older than 1.27, the first minor that supports tcpx"),
    (dict(fabric="tcpx", gke_version="1.28.8-gke.1094999"), "gke_version: GKE 1.28.8-gke.1094999 is below the minimum"),
    (dict(fabric="tcpxo", gke_version="v1.27.9"), "gke_version: GKE v1.27.9 is older than 1.28"),
    (dict(fabric="tcpxo", gke_version="1.30.3-gke.1"), "gke_version: GKE 1.30.3-gke.1 is below the minimum 1.30.4-gke.1129000"),
])
def test_invalid_input_names_the_option(run, args, message):
    result = run(args)
    assert result.get("failed"), result
    assert message in result["msg"]


@pytest.mark.parametrize("args, key, value", [
    (dict(fabric="socket", interfaces=["^docker", "lo"]), "NCCL_SOCKET_IFNAME", "^docker,lo"),
    (dict(fabric="socket", interfaces=["=eth0"]), "NCCL_SOCKET_IFNAME", "=eth0"),
    (dict(fabric="socket", ctrl_interface="^lo"), "NCCL_SOCKET_IFNAME", "^lo"),
    (dict(fabric="ib", interfaces=["mlx5_0:1", "mlx5_1:1"]), "NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"),
    (dict(fabric="roce", interfaces=["mlx5_bond_0"], ctrl_interface="bond0.100"), "NCCL_SOCKET_IFNAME", "bond0.100"),
    (dict(fabric="tcpx", interfaces=["enp1s0f0np0_15"[:15], "b", "c", "d"]), "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
     "enp1s0f0np0_15,b,c,d"),
    (dict(fabric="tcpx", gke_version="1.27.7-gke.1121000"), "NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
    (dict(fabric="tcpx", gke_version="1.27"), "NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
    (dict(fabric="tcpxo", gke_version="1.36"), "NCCL_FASTRAK_CTRL_DEV", "eth0"),
    (dict(fabric="rdma", gke_version="1.20"), "NCCL_SOCKET_IFNAME", "eth0"),
], ids=["socket exclude", "socket exact", "ctrl exclude", "hca ports", "vlan ctrl", "15 bytes", "tcpx floor itself",
        "tcpx first minor", "minor after the table", "rdma has no floor"])
def test_valid_edge_input_is_taken(run, args, key, value):
    result = run(args)
    assert not result.get("failed"), result
    assert result["env"][key] == value


# ------------------------------------------------------------------ dest

def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_dest_create_check_mode_writes_nothing(run, tmp_path):
    dest = str(tmp_path / "nccl.conf")
    result = run(dict(fabric="roce", interfaces=["mlx5_0"], dest=dest), check=True, diff=True)
    assert result["changed"] and not os.path.exists(dest)
    assert result["changes"] == [dict(action="create", kind="file", name=dest)]
    assert result["diff"][0]["after"] == result["nccl_conf"] and result["diff"][0]["before"] == ""
    assert "NCCL_IB_HCA=" in result["diff"][0]["after"]


def test_dest_create_then_noop(run, tmp_path):
    dest = str(tmp_path / "nccl.conf")
    args = dict(fabric="roce", interfaces=["mlx5_0", "mlx5_1"], ctrl_interface="bond0", dest=dest)
    first = run(args)
    assert first["changed"] and first["dest"] == dest
    with open(dest) as handle:
        text = handle.read()
    assert text == first["nccl_conf"]
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1\n" in text and "NCCL_SOCKET_IFNAME=bond0\n" in text
    assert _mode(dest) == 0o644
    second = run(args, diff=True)
    assert not second["changed"] and second["changes"] == [] and second["diff"] == []
    check = run(args, check=True)
    assert not check["changed"]


def test_dest_change_check_mode_then_apply(run, tmp_path):
    dest = str(tmp_path / "nccl.conf")
    run(dict(fabric="tcpx", gke_version="1.33", dest=dest))
    before = open(dest).read()
    args = dict(fabric="tcpx", gke_version="1.34", dest=dest)
    check = run(args, check=True, diff=True)
    assert check["changed"]
    assert check["changes"] == [dict(action="update", kind="file", name=dest, fields=["content"])]
    assert open(dest).read() == before  # check mode leaves the file alone
    diff = check["diff"][0]
    # the file itself on both sides (Ansible shows it as a unified diff), not a JSON list of its lines
    assert diff["before"] == before and diff["after"] == check["nccl_conf"]
    assert "NCCL_ALGO=Ring\n" in diff["before"] and "NCCL_ALGO=Ring,Tree\n" in diff["after"]
    assert "NCCL_NVLS_ENABLE=0" in diff["before"] and "NCCL_NVLS_ENABLE" not in diff["after"]
    assert diff["before_header"] == "file/%s (current)" % dest and diff["after_header"] == "file/%s (update)" % dest
    applied = run(args)
    assert applied["changed"] and "NCCL_ALGO=Ring,Tree\n" in open(dest).read()
    assert not run(args)["changed"]


def test_dest_replaces_foreign_content(run, tmp_path):
    dest = tmp_path / "nccl.conf"
    dest.write_text("NCCL_DEBUG=TRACE\n# hand edit\n")
    result = run(dict(fabric="socket", interfaces=["eth0"], dest=str(dest)))
    assert result["changed"]
    assert dest.read_text() == result["nccl_conf"]
    assert "TRACE" not in dest.read_text()


def test_dest_mode_change_only(run, tmp_path):
    dest = str(tmp_path / "nccl.conf")
    args = dict(fabric="socket", interfaces=["eth0"], dest=dest)
    run(args)
    args["mode"] = "0600"
    check = run(args, check=True, diff=True)
    assert check["changed"] and _mode(dest) == 0o644
    assert check["changes"] == [dict(action="update", kind="file", name=dest, fields=["attributes"])]
    applied = run(args)
    assert applied["changed"] and _mode(dest) == 0o600
    assert not run(args)["changed"]


def test_dest_in_missing_folder_fails(run, tmp_path):
    result = run(dict(fabric="socket", dest=str(tmp_path / "missing" / "nccl.conf")))
    assert result["failed"] and "dest: the folder" in result["msg"]


def test_dest_that_is_a_folder_fails(run, tmp_path):
    result = run(dict(fabric="socket", dest=str(tmp_path)))
    assert result["failed"] and "is a folder" in result["msg"]


@pytest.mark.parametrize("extra, words", [
    (dict(mode="rwxr-xr-x"), "mode: 'rwxr-xr-x' is neither an octal mode"),
    (dict(mode="0999"), "mode: '0999' is not an octal mode"),
    (dict(mode="017777"), "mode: '017777' is not an octal mode"),
    (dict(mode=-1), "mode: -1 is out of range"),
    (dict(mode=0o17777), "is out of range"),
    (dict(mode=True), "mode: must be an octal string"),
    (dict(mode=""), "mode: must be an octal string"),
    (dict(mode="u=rw;rm"), "is neither an octal mode"),
    (dict(owner="no-such-user-gpu-ops"), "owner: 'no-such-user-gpu-ops' does not exist"),
    (dict(group="no-such-group-gpu-ops"), "group: 'no-such-group-gpu-ops' does not exist"),
    (dict(overrides={"NCCL_DEBUG": "INFO\x1b[2J"}), "overrides: nccl.conf line"),
    (dict(mode="0999", owner="no-such-user-gpu-ops"), "mode: '0999' is not an octal mode (digits 0-7, at most 07777); owner:"),
], ids=["symbolic ls-style", "digit 9", "too many digits", "negative", "int out of range", "boolean", "empty",
        "shell in mode", "unknown owner", "unknown group", "escape sequence", "every problem at once"])
def test_bad_file_options_write_nothing(run, tmp_path, extra, words):
    dest = tmp_path / "nccl.conf"
    result = run(dict(dict(fabric="socket", interfaces=["eth0"], dest=str(dest)), **extra))
    assert result.get("failed"), result
    assert words in result["msg"] and "nothing was written" in result["msg"], result["msg"]
    assert not dest.exists() and os.listdir(str(tmp_path)) == [], "nothing may be written, not even a temporary file"


def test_bad_mode_leaves_an_existing_file_untouched(run, tmp_path):
    dest = tmp_path / "nccl.conf"
    dest.write_text("NCCL_DEBUG=WARN\n")
    os.chmod(str(dest), 0o640)
    result = run(dict(fabric="socket", interfaces=["eth0"], dest=str(dest), mode="0o644"))
    assert result["failed"] and "mode: " in result["msg"]
    assert dest.read_text() == "NCCL_DEBUG=WARN\n" and _mode(str(dest)) == 0o640


def test_symbolic_mode_is_accepted(run, tmp_path):
    dest = tmp_path / "nccl.conf"
    result = run(dict(fabric="socket", interfaces=["eth0"], dest=str(dest), mode="u=rw,go="))
    assert result["changed"] and _mode(str(dest)) == 0o600
