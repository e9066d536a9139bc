# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL catalog (plugins/module_utils/_catalog/nccl.py): the NCCL environments of each fabric, overrides, shell exports."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl


SEED_GUIDE_TCPXO_ENV = """
NCCL_FASTRAK_CTRL_DEV=eth0
NCCL_FASTRAK_IFNAME=eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8
NCCL_SOCKET_IFNAME=eth0
NCCL_CROSS_NIC=0
NCCL_MIN_NCHANNELS=4
NCCL_TUNER_PLUGIN=libnccl-tuner.so
NCCL_TUNER_CONFIG_PATH=/usr/local/nvidia/lib64/a3plus_tuner_config.textproto
NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE=/usr/local/nvidia/lib64/a3plus_guest_config.textproto
NCCL_P2P_NET_CHUNKSIZE=524288
NCCL_P2P_PCI_CHUNKSIZE=524288
NCCL_P2P_NVL_CHUNKSIZE=1048576
NCCL_FASTRAK_NUM_FLOWS=2
NCCL_FASTRAK_USE_SNAP=1
NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS=600000
NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL=0
NCCL_BUFFSIZE=8388608
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
NCCL_NET_GDR_LEVEL=PIX
NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING=0
NCCL_FASTRAK_USE_LLCM=1
"""


# ------------------------------------------------------------------ NCCL environments

def test_tcpxo_set_covers_the_guides_list():
    env, _warnings = nccl.nccl_environment("tcpxo")
    guide = dict(line.split("=", 1) for line in SEED_GUIDE_TCPXO_ENV.split())
    assert {k: env[k] for k in guide} == guide
    # where the Jan 2026 release differs from the (older) guide list
    assert env["NCCL_PROTO"] == "Simple,LL128" and "NCCL_ALGO" not in env and "NCCL_NVLS_ENABLE" not in env


def test_every_known_key_of_every_set():
    for fabric, variants in nccl.NCCL_ENVS.items():
        for variant, env in variants.items():
            for key in env:
                if key.startswith("NCCL_"):
                    assert nccl.known_nccl_key(key), (fabric, variant, key)


def test_tcpx_bindings_need_an_a3_high():
    with pytest.raises(ValueError, match="machine_type: machine type 'a4-highgpu-8g' does not run tcpx"):
        nccl.nccl_environment("tcpx", machine_type="a4-highgpu-8g")


def test_bare_metal_ignores_machine_type():
    env, warnings = nccl.nccl_environment("ib", machine_type="a3-highgpu-8g")
    assert warnings == ["machine_type is ignored for the ib fabric"] and "NCCL_IB_HCA" not in env


def test_interfaces_as_comma_string():
    env, _w = nccl.nccl_environment("tcpx", "1.34", interfaces="a,b,c,d")
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "a,b,c,d"


def test_override_value_types():
    env, _w = nccl.nccl_environment("socket", overrides=dict(NCCL_SOCKET_NTHREADS=2, NCCL_IB_DISABLE=True))
    assert env["NCCL_SOCKET_NTHREADS"] == "2" and env["NCCL_IB_DISABLE"] == "1"
    with pytest.raises(ValueError, match="overrides.NCCL_DEBUG: the value must be a string"):
        nccl.nccl_environment("socket", overrides=dict(NCCL_DEBUG=["INFO"]))


def test_shell_quoting():
    exports = nccl.as_exports({"A": "x y", "B": "it's", "C": "plain-1.0", "D": ""})
    assert exports == "export A='x y'\nexport B='it'\"'\"'s'\nexport C=plain-1.0\nexport D=''\n"


def test_a_trailing_newline_is_quoted_not_passed_to_the_shell():
    """``x\n`` once looked plain to a ``$``-anchored check and reached the shell unquoted: the newline ended the export."""
    exports = nccl.as_exports({"NCCL_DEBUG": "INFO\ntouch /tmp/pwned"})
    assert exports == "export NCCL_DEBUG='INFO\ntouch /tmp/pwned'\n"
    assert nccl.as_exports({"A": "x\n"}) == "export A='x\n'\n"


def test_exports_evaluate_in_a_real_shell():
    import subprocess  # pylint: disable=import-outside-toplevel

    env, _w = nccl.nccl_environment("tcpx", "1.34", overrides=dict(NCCL_DEBUG_FILE="/tmp/nccl log's %h.txt"))
    script = nccl.as_exports(env) + 'printf "%s\\n" "$LD_LIBRARY_PATH" "$NCCL_GPUDIRECTTCPX_RX_BINDINGS" "$NCCL_DEBUG_FILE"'
    out = subprocess.run(["bash", "-c", script], env={"LD_LIBRARY_PATH": "/opt/lib", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["/opt/lib:/usr/local/nvidia/lib64", env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"], "/tmp/nccl log's %h.txt"]
    out = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "/usr/local/nvidia/lib64"


def test_a4x_runs_gib_and_fails_closed_without_guessed_tuning():
    env, warnings = nccl.nccl_environment("rdma-a4x")
    # gIB loads, NCCL cannot fall back to sockets; the A3 Ultra / A4 tuning values and tuner file are not applied
    assert env["NCCL_NET"] == "gIB" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert "NCCL_TUNER_CONFIG_PATH" not in env and "NCCL_IB_TC" not in env
    assert nccl.nccl_environment("rdma")[0]["NCCL_IB_TC"] == "52", "A3 Ultra keeps its set"
    assert warnings == []
    # a gIB key set by hand on A4X belongs to its own plugin: no "other plugin" warning
    dummy, warned = nccl.nccl_environment("rdma-a4x", overrides={"NCCL_IB_TC": "52"})
    assert not any("belongs to the" in w for w in warned)
