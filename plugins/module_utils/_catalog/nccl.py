# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NCCL environment catalog: the recommended variables of every fabric, and their output formats.

One table per fact, read by the nccl_env module (through ``_host/nccl_conf``), the ``nccl_env`` filter,
the workload patcher and the GPU sharing checks. Fabrics: GPUDirect-TCPX (A3 High), GPUDirect-TCPXO
(A3 Mega), GPUDirect-RDMA with the gIB plugin (A3 Ultra / A4), and bare-metal InfiniBand, RoCE and
sockets.

Sources (shared research notes gke-gpudirect.md and nvidia-stack.md): the guide's "recommended NCCL
configuration" section (TCPX classic), CEA nccl-config.yaml after commit 0e5609b0 (TCPX GKE 1.34+), the
TCPXO Jan 9 2026 release notes / nccl-env-profile.sh, the gIB ``set_nccl_env.sh`` values (A3 Ultra / A4),
NCCL's documented variables for bare metal; the guest config checker's rules for TCPXO.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import interface_name_problem
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import (
    CONTROL_INTERFACE, LIBRARY_DIR, MACHINES, PROFILES, RELEASES, interface_names, profile_machine, release,
    version_floor_error,
)


# --------------------------------------------------------------------------------------------
# NCCL environments
# --------------------------------------------------------------------------------------------

FABRICS = ("tcpx", "tcpxo", "rdma", "rdma-a4x", "ib", "roce", "socket")

# TCPX flow-steering CPU bindings per machine type, one entry per GPU NIC (in NIC order).
TCPX_CPU_BINDINGS = {
    "a3-highgpu-8g": dict(
        tx=["8-21,112-125", "8-21,112-125", "60-73,164-177", "60-73,164-177"],
        # 126-139 since CEA PR #570 (Mar 2026; was 124-139, overlapping the TX cores)
        rx=["22-35,126-139", "22-35,126-139", "74-87,178-191", "74-87,178-191"],
    ),
}

# gIB tuner configuration per machine type (set_nccl_env.sh picks the same file).
GIB_TUNER_CONFIGS = {
    "a3-ultragpu-8g": "/usr/local/gib/configs/tuner_config_a3u.txtpb",
    "a4-highgpu-8g": "/usr/local/gib/configs/tuner_config_a4.txtpb",
}

# the guide's recommended TCPX set (plugin v3.1.9 / daemon v2.0.12)
_TCPX_CLASSIC_ENV = {
    "LD_LIBRARY_PATH": "{libdir}",
    "NCCL_SOCKET_IFNAME": "{ctrl}",
    "NCCL_ALGO": "Ring",
    "NCCL_PROTO": "Simple",
    "NCCL_CROSS_NIC": "0",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "{ifnames}",
    "NCCL_GPUDIRECTTCPX_CTRL_DEV": "{ctrl}",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
    "NCCL_BUFFSIZE": "4194304",
    "NCCL_NSOCKS_PERTHREAD": "4",
    "NCCL_SOCKET_NTHREADS": "1",
    "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "{tx}",
    "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "{rx}",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
    "NCCL_NVLS_ENABLE": "0",
}


def _tcpx_devmem_env(classic):
    """GKE 1.34+ (plugin v3.1.12 / daemon v2.0.15, CEA nccl-config.yaml "Finalize NCCL config"): the
    classic set with NCCL_ALGO Ring,Tree and without NCCL_NVLS_ENABLE."""
    env = dict((key, value) for key, value in classic.items() if key != "NCCL_NVLS_ENABLE")
    env["NCCL_ALGO"] = "Ring,Tree"
    return env


# fabric -> variant -> ordered NCCL environment. ``{name}`` placeholders are derived values:
# ctrl (control interface), ifnames (GPU NICs, comma-joined), tx/rx (TCPX bindings), libdir,
# devices (CUDA_VISIBLE_DEVICES), tuner (gIB tuner config), hcas (NCCL_IB_HCA list).
NCCL_ENVS = {
    "tcpx": {
        "classic": _TCPX_CLASSIC_ENV,
        "devmem": _tcpx_devmem_env(_TCPX_CLASSIC_ENV),
    },
    "tcpxo": {
        # Jan 9 2026 release (plugin v1.0.15 / daemon v1.0.21), same values as nccl-env-profile.sh
        "default": {
            "LD_LIBRARY_PATH": "{libdir}",
            "NCCL_FASTRAK_CTRL_DEV": "{ctrl}",
            "NCCL_FASTRAK_IFNAME": "{ifnames}",
            "NCCL_SOCKET_IFNAME": "{ctrl}",
            "NCCL_CROSS_NIC": "0",
            "NCCL_PROTO": "Simple,LL128",
            "NCCL_MIN_NCHANNELS": "4",
            "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
            "NCCL_TUNER_CONFIG_PATH": "{libdir}/a3plus_tuner_config.textproto",
            "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": "{libdir}/a3plus_guest_config.textproto",
            "CUDA_VISIBLE_DEVICES": "{devices}",
            "NCCL_NVLSTREE_MAX_CHUNKSIZE": "131072",
            "NCCL_P2P_NET_CHUNKSIZE": "524288",
            "NCCL_P2P_PCI_CHUNKSIZE": "524288",
            "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
            "NCCL_FASTRAK_NUM_FLOWS": "2",
            "NCCL_FASTRAK_USE_SNAP": "1",
            "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
            "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
            "NCCL_BUFFSIZE": "8388608",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
            "NCCL_FASTRAK_USE_LLCM": "1",
            "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
            "NCCL_DEBUG": "WARN",
            "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV,COLL,GRAPH",
        },
    },
    "rdma": {
        # gIB set_nccl_env.sh values (A3 Ultra / A4); sourcing the script is equivalent
        "default": {
            "LD_LIBRARY_PATH": "{libdir}",
            "NCCL_NET": "gIB",
            "NCCL_SOCKET_IFNAME": "{ctrl}",
            "NCCL_CROSS_NIC": "0",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_P2P_NET_CHUNKSIZE": "131072",
            "NCCL_NVLS_CHUNKSIZE": "524288",
            "NCCL_IB_ADAPTIVE_ROUTING": "1",
            "NCCL_IB_QPS_PER_CONNECTION": "4",
            "NCCL_IB_TC": "52",
            "NCCL_IB_FIFO_TC": "84",
            "NCCL_TUNER_CONFIG_PATH": "{tuner}",
        },
    },
    "rdma-a4x": {
        # A4X (GB200, arm64): what makes the gIB plugin load and fail closed (NCCL_NET=gIB: no silent fallback to
        # sockets). The tuning values of the arm64 plugin's set_nccl_env.sh are not in our sources, so they are not
        # guessed from the A3 Ultra / A4 set: workloads source that script (gpudirect_workload mounts /usr/local/gib,
        # the NCCL test sources it), which sets them for the machine it runs on.
        "default": {
            "LD_LIBRARY_PATH": "{libdir}",
            "NCCL_NET": "gIB",
            "NCCL_SOCKET_IFNAME": "{ctrl}",
        },
    },
    # bare metal: NCCL's documented variables; interfaces name the HCAs (ib/roce) or the sockets' NICs
    "ib": {
        "default": {
            "NCCL_NET": "IB",
            "NCCL_IB_DISABLE": "0",
            "NCCL_IB_HCA": "{hcas}",
            "NCCL_SOCKET_IFNAME": "{ctrl}",
        },
    },
    "roce": {
        "default": {
            "NCCL_NET": "IB",
            "NCCL_IB_DISABLE": "0",
            "NCCL_IB_HCA": "{hcas}",
            # RoCE v2 GID of the default Mellanox/DOCA GID table; override when yours differs
            "NCCL_IB_GID_INDEX": "3",
            "NCCL_SOCKET_IFNAME": "{ctrl}",
        },
    },
    "socket": {
        "default": {
            "NCCL_NET": "Socket",
            "NCCL_IB_DISABLE": "1",
            "NCCL_SOCKET_IFNAME": "{ifnames}",
        },
    },
}


def _refuse(value, reason):
    return dict(action="refuse", value=value, reason=reason)


def _warn(reason):
    return dict(action="warn", value=None, reason=reason)


# Keys that, overridden on a fabric, conflict with what that fabric's plugin enforces.
# action "refuse": the TCPXO guest config checker aborts the workload, so an override is an error.
# action "warn": the override is kept and a warning says why it is risky.
_CHECKER_DROPPED = "removed from the TCPXO profile in Aug 2025; the guest config checker flags it as unexpected"
GUEST_CONFIG_CONSTRAINTS = {
    "tcpxo": {
        "NCCL_NVLSTREE_MAX_CHUNKSIZE": _refuse("131072", "the TCPXO guest config checker aborts the workload unless it is 131072"),
        "NCCL_TUNER_CONFIG_PATH": _warn("the TCPXO guest config checker aborts the workload when the file does not exist"),
        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": _warn(
            "the guest config checker reads its rules from this file; keep the installed one"),
        "NCCL_PROTO": _warn("the guest config checker flags NCCL_PROTO values that differ from the installed profile"),
        "NCCL_ALGO": _warn(_CHECKER_DROPPED),
        "NCCL_NVLS_ENABLE": _warn(_CHECKER_DROPPED),
    },
}

# Keys upstream dropped from an environment variant, with why; setting them warns.
DROPPED_KEYS = {
    ("tcpx", "devmem"): {
        "NCCL_GPUDIRECTTCPX_FORCE_ACK": "ignored by tcpx-daemon v2.0.15 (devmem-TCP, GKE 1.34+)",
        "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "ignored by tcpx-daemon v2.0.15 (devmem-TCP, GKE 1.34+)",
        "NCCL_MAX_NCHANNELS": "dropped from the recommended TCPX set for GKE 1.34+",
        "NCCL_MIN_NCHANNELS": "dropped from the recommended TCPX set for GKE 1.34+",
    },
}

# Known NCCL_* variables: NCCL core (docs "Environment Variables"), nccl-tests, and the
# variables of the GPUDirect NCCL plugins. Overriding any other NCCL_* key warns.
NCCL_CORE_KEYS = frozenset("""
NCCL_ALGO NCCL_BUFFSIZE NCCL_CHECK_POINTERS NCCL_COLLNET_ENABLE NCCL_COLLNET_NODE_THRESHOLD
NCCL_COMM_BLOCKING NCCL_COMM_ID NCCL_COMM_SPLIT_SHARE_RESOURCES NCCL_CONF_FILE NCCL_CROSS_NIC
NCCL_CTA_POLICY NCCL_CUMEM_ENABLE NCCL_CUMEM_HOST_ENABLE NCCL_DEBUG NCCL_DEBUG_FILE NCCL_DEBUG_SUBSYS
NCCL_DEBUG_TIMESTAMP_FORMAT NCCL_DEBUG_TIMESTAMP_LEVELS NCCL_DMABUF_ENABLE NCCL_GDRCOPY_ENABLE
NCCL_GDRCOPY_FIFO_ENABLE NCCL_GDRCOPY_FLUSH_ENABLE NCCL_GDRCOPY_SYNC_ENABLE NCCL_GRAPH_DUMP_FILE
NCCL_GRAPH_FILE NCCL_GRAPH_MIXING_SUPPORT NCCL_GRAPH_REGISTER NCCL_HOSTID NCCL_IB_ADAPTIVE_ROUTING
NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE NCCL_IB_AR_THRESHOLD NCCL_IB_CUDA_SUPPORT NCCL_IB_DATA_DIRECT
NCCL_IB_DISABLE NCCL_IB_ECE_ENABLE NCCL_IB_FIFO_TC NCCL_IB_GID_INDEX NCCL_IB_HCA NCCL_IB_MERGE_NICS
NCCL_IB_MERGE_VFS NCCL_IB_OOO_RQ NCCL_IB_PCI_RELAXED_ORDERING NCCL_IB_PKEY NCCL_IB_QPS_PER_CONNECTION
NCCL_IB_RETRY_CNT NCCL_IB_RETURN_ASYNC_EVENTS NCCL_IB_ROCE_VERSION_NUM NCCL_IB_SL
NCCL_IB_SPLIT_DATA_ON_QPS NCCL_IB_TC NCCL_IB_TIMEOUT NCCL_IB_USE_INLINE NCCL_IGNORE_CPU_AFFINITY
NCCL_IGNORE_DISABLED_P2P NCCL_LAUNCH_MODE NCCL_LL128_BUFFSIZE NCCL_LL_BUFFSIZE NCCL_LOCAL_REGISTER
NCCL_MAX_CTAS NCCL_MAX_NCHANNELS NCCL_MAX_NRINGS NCCL_MAX_P2P_NCHANNELS NCCL_MIN_CTAS
NCCL_MIN_NCHANNELS NCCL_MIN_NRINGS NCCL_MIN_P2P_NCHANNELS NCCL_MNNVL_ENABLE NCCL_NCHANNELS_PER_NET_PEER
NCCL_NET NCCL_NET_DISABLE_INTRA NCCL_NET_FORCE_FLUSH NCCL_NET_GDR_C2C NCCL_NET_GDR_LEVEL
NCCL_NET_GDR_READ NCCL_NET_MERGE_LEVEL NCCL_NET_OVERHEAD NCCL_NET_PLUGIN NCCL_NET_SHARED_BUFFERS
NCCL_NET_SHARED_COMMS NCCL_NETDEVS_POLICY NCCL_NSOCKS_PERTHREAD NCCL_NTHREADS NCCL_NVB_DISABLE
NCCL_NVLS_CHUNKSIZE NCCL_NVLS_ENABLE NCCL_NVLS_NCHANNELS NCCL_NVLSTREE_MAX_CHUNKSIZE
NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE NCCL_P2P_DIRECT_DISABLE NCCL_P2P_DISABLE NCCL_P2P_LEVEL
NCCL_P2P_LL_THRESHOLD NCCL_P2P_NET_CHUNKSIZE NCCL_P2P_NVL_CHUNKSIZE NCCL_P2P_PCI_CHUNKSIZE
NCCL_P2P_PXN_LEVEL NCCL_P2P_READ_ENABLE NCCL_P2P_USE_CUDA_MEMCPY NCCL_PROFILER_PLUGIN NCCL_PROTO
NCCL_PROXY_PROFILE NCCL_PXN_C2C NCCL_PXN_DISABLE NCCL_RAS_ADDR NCCL_RAS_ENABLE NCCL_RAS_TIMEOUT_FACTOR
NCCL_RUNTIME_CONNECT NCCL_SET_STACK_SIZE NCCL_SET_THREAD_NAME NCCL_SHM_DISABLE NCCL_SHM_LOCALITY
NCCL_SHM_MEMCPY_MODE NCCL_SHM_USE_CUDA_MEMCPY NCCL_SINGLE_RING_THRESHOLD NCCL_SOCKET_FAMILY
NCCL_SOCKET_IFNAME NCCL_SOCKET_NTHREADS NCCL_SOCKET_RETRY_CNT NCCL_SOCKET_RETRY_SLEEP_MSEC
NCCL_TOPO_DUMP_FILE NCCL_TOPO_FILE NCCL_TREE_THRESHOLD NCCL_TUNER_CONFIG_PATH NCCL_TUNER_PLUGIN
NCCL_WARN_ENABLE_DEBUG_INFO NCCL_WORK_FIFO_BYTES NCCL_WORK_FIFO_DEPTH
NCCL_TESTS_DEVICE NCCL_TESTS_MIN_BW NCCL_TESTS_SPLIT NCCL_TESTS_SPLIT_MASK
""".split())

# plugin family -> (fabric it belongs to, its known keys)
NCCL_PLUGIN_KEYS = {
    "NCCL_GPUDIRECTTCPX_": ("tcpx", frozenset("""
NCCL_GPUDIRECTTCPX_SOCKET_IFNAME NCCL_GPUDIRECTTCPX_CTRL_DEV NCCL_GPUDIRECTTCPX_TX_BINDINGS
NCCL_GPUDIRECTTCPX_RX_BINDINGS NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS
NCCL_GPUDIRECTTCPX_FORCE_ACK NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP
NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX NCCL_GPUDIRECTTCPX_PORT_BEGIN NCCL_GPUDIRECTTCPX_PORT_END
""".split())),
    "NCCL_FASTRAK_": ("tcpxo", frozenset("""
NCCL_FASTRAK_CTRL_DEV NCCL_FASTRAK_IFNAME NCCL_FASTRAK_NUM_FLOWS NCCL_FASTRAK_USE_SNAP
NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL
NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING NCCL_FASTRAK_USE_LLCM NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY
""".split())),
    "NCCL_SHIMNET_": ("tcpxo", frozenset(["NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE"])),
}
# keys used by the GPUDirect plugins' scripts rather than by NCCL
NCCL_SCRIPT_KEYS = frozenset(["NCCL_DYNAMIC_CHUNK_SIZE", "NCCL_LIB_DIR"])

# Keys whose value is appended to the existing one rather than replacing it (exports, pod env).
PATH_KEYS = ("LD_LIBRARY_PATH",)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------------------------
# NCCL environment
# --------------------------------------------------------------------------------------------

def _check_fabric(fabric):
    if fabric not in FABRICS:
        raise ValueError("fabric: unknown fabric %r; allowed: %s" % (fabric, ", ".join(FABRICS)))


def nccl_variant(fabric, gke_version=None):
    """The NCCL environment variant of a fabric on a GKE version."""
    _check_fabric(fabric)
    if fabric in PROFILES:
        return release(fabric, gke_version)["nccl_env"]
    return "default"


# An InfiniBand/RoCE HCA as NCCL_IB_HCA takes it: an ibverbs device name (IBV_SYSFS_NAME_MAX 64), optionally :port.
_HCA = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(?::[0-9]{1,3})?\Z")


def _interface_problem(fabric, name, first):
    """Why ``name`` cannot be one of ``fabric``'s interfaces, or None.

    GKE fabrics name exact netdevs; ib and roce name HCAs (mlx5_0 or mlx5_0:1; the catalog adds the exact-match
    ``=``); socket names NCCL_SOCKET_IFNAME prefixes, the first of which may carry NCCL's ``^`` (exclude) or ``=``
    (exact) for the whole list.
    """
    if fabric in ("ib", "roce"):
        if isinstance(name, str) and _HCA.match(name):
            return None
        return "%r is not an HCA name (an ibverbs device such as mlx5_0, optionally with :port)" % (name,)
    if fabric == "socket" and first and isinstance(name, str) and name[:1] in ("^", "="):
        why = interface_name_problem(name[1:])
        return None if why is None else "%r: %s" % (name, why)
    return interface_name_problem(name)


def _format_bindings(interfaces, cores):
    return ";".join("%s:%s" % (i, c) for i, c in zip(interfaces, cores))


def _stringify(key, value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        if "\n" in value or "\r" in value or "\0" in value:
            raise ValueError("overrides.%s: the value must be one line" % key)
        return value
    raise ValueError("overrides.%s: the value must be a string, a number or a boolean, not %s" % (
        key, type(value).__name__))


def known_nccl_key(key):
    """Whether ``key`` is an NCCL_* variable the catalog knows."""
    if key in NCCL_CORE_KEYS or key in NCCL_SCRIPT_KEYS:
        return True
    return any(key in keys for _fabric, keys in NCCL_PLUGIN_KEYS.values())


def _plugin_fabric(fabric):
    """The fabric whose NCCL plugin a fabric runs (rdma-a4x runs rdma's gIB plugin; the others their own)."""
    return PROFILES[fabric]["fabric"] if fabric in PROFILES else fabric


def _key_fabric(key):
    for prefix, (fabric, _keys) in NCCL_PLUGIN_KEYS.items():
        if key.startswith(prefix):
            return fabric
    return None


def nccl_environment(fabric, gke_version=None, machine_type=None, interfaces=None, overrides=None,
                     ctrl_interface=None):
    """The recommended NCCL environment of a fabric: (env dict, warnings list).

    ``fabric``: tcpx, tcpxo, rdma (GKE) or ib, roce, socket (bare metal / fallback).
    ``gke_version``: picks the variant where upstream changed the recommendation (TCPX on 1.34+);
      without it the baseline variant is used and a warning says so.
    ``machine_type``: checked against the fabric; picks TCPX CPU bindings and the gIB tuner file.
    ``interfaces``: the GPU NIC names (GKE fabrics; default eth1..ethN / eth2..eth9), the HCA names
      (ib, roce) or the socket NICs (socket).
    ``ctrl_interface``: the control / bootstrap NIC (default eth0 on GKE; unset on bare metal).
    ``overrides``: key -> value replacing or adding keys; a None value removes the key. Unknown
      NCCL_* keys, keys of another fabric's plugin, keys upstream dropped from the variant and keys
      the TCPXO guest config checker watches warn; an NCCL_NVLSTREE_MAX_CHUNKSIZE other than 131072
      on tcpxo is refused (the checker would abort the workload).
    Raises ValueError naming the option on bad input.
    """
    _check_fabric(fabric)
    warnings = []
    overrides = dict(overrides or {})
    variant = nccl_variant(fabric, gke_version)
    if fabric in PROFILES and gke_version is None and len(RELEASES[_plugin_fabric(fabric)]) > 1:
        warnings.append(
            "gke_version not given: using the %s NCCL set of %s; GKE %s+ uses the %s set" % (
                variant, fabric, RELEASES[fabric][-1]["gke_from"], RELEASES[fabric][-1]["nccl_env"]))
    values = dict(libdir=LIBRARY_DIR)

    if interfaces is not None:
        if isinstance(interfaces, str):
            interfaces = [i.strip() for i in interfaces.split(",") if i.strip()]
        interfaces = list(interfaces)
        for index, name in enumerate(interfaces):
            why = _interface_problem(fabric, name, index == 0)
            if why:
                raise ValueError("interfaces: %s" % why)
        if len(set(interfaces)) != len(interfaces):
            raise ValueError("interfaces: names repeat: %s" % ", ".join(interfaces))

    if ctrl_interface is not None:
        why = _interface_problem("socket" if fabric not in PROFILES else fabric, ctrl_interface, True)
        if why:
            raise ValueError("ctrl_interface: %s" % why)
    if fabric in PROFILES and gke_version is not None:
        too_old = version_floor_error(fabric, gke_version)
        if too_old:
            raise ValueError("gke_version: %s" % too_old)

    if fabric in PROFILES:
        entry = PROFILES[fabric]
        machine_type_given = machine_type
        try:
            machine_type = profile_machine(fabric, machine_type)
        except ValueError as exc:
            raise ValueError("machine_type: %s" % exc)
        if interfaces is None:
            interfaces = interface_names(fabric)
        elif len(interfaces) != entry["gpu_nic_count"]:
            raise ValueError("interfaces: %s has %d GPU NICs, %d given" % (
                fabric, entry["gpu_nic_count"], len(interfaces)))
        ctrl = ctrl_interface or CONTROL_INTERFACE
        if ctrl in interfaces:
            raise ValueError("ctrl_interface: %s is also a GPU interface" % ctrl)
        values.update(ctrl=ctrl, ifnames=",".join(interfaces),
                      devices=",".join(str(i) for i in range(MACHINES[machine_type]["gpus_per_node"])))
        if fabric == "tcpx":
            bindings = TCPX_CPU_BINDINGS[machine_type]
            values.update(tx=_format_bindings(interfaces, bindings["tx"]),
                          rx=_format_bindings(interfaces, bindings["rx"]))
        if fabric == "rdma":
            values["tuner"] = GIB_TUNER_CONFIGS[machine_type]
            if machine_type_given is None:
                warnings.append("machine_type not given: using the %s tuner configuration; pass machine_type "
                                "for the other rdma machines (%s)" % (machine_type, ", ".join(entry["machine_types"])))
    else:
        if machine_type is not None:
            warnings.append("machine_type is ignored for the %s fabric" % fabric)
        values["ctrl"] = ctrl_interface
        if fabric in ("ib", "roce"):
            values["hcas"] = ("=" + ",".join(interfaces)) if interfaces else None
        else:
            values["ifnames"] = ",".join(interfaces) if interfaces else ctrl_interface

    env = {}
    for key, template in NCCL_ENVS[fabric][variant].items():
        names = re.findall(r"{(\w+)}", template)
        if any(values.get(n) is None for n in names):
            continue  # a value that depends on input the caller did not give (bare metal)
        env[key] = template.format(**values)

    warnings.extend(_apply_overrides(fabric, variant, env, overrides, values))
    return env, warnings


def _apply_overrides(fabric, variant, env, overrides, values):
    warnings = []
    constraints = GUEST_CONFIG_CONSTRAINTS.get(_plugin_fabric(fabric), {})
    dropped = DROPPED_KEYS.get((fabric, variant), {})
    for key in sorted(overrides):
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError("overrides: %r is not an environment variable name" % (key,))
        value = overrides[key]
        if value is None:
            env.pop(key, None)
            continue
        value = _stringify(key, value)
        rule = constraints.get(key)
        if rule and rule["action"] == "refuse" and value != rule["value"]:
            raise ValueError("overrides.%s: %s must be %s on %s: %s" % (key, key, rule["value"], fabric, rule["reason"]))
        if key.startswith("NCCL_"):
            owner = _key_fabric(key)
            if not known_nccl_key(key):
                warnings.append("overrides.%s: not a known NCCL variable (check the spelling)" % key)
            elif owner and owner != _plugin_fabric(fabric):
                warnings.append("overrides.%s: belongs to the %s plugin and has no effect on %s" % (key, owner, fabric))
            if rule and rule["action"] == "warn" and env.get(key) != value:
                warnings.append("overrides.%s: %s" % (key, rule["reason"]))
            if key in dropped:
                warnings.append("overrides.%s: %s" % (key, dropped[key]))
            if key in ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_FASTRAK_IFNAME") and values.get("ifnames") \
                    and value != values["ifnames"] and owner == _plugin_fabric(fabric):
                warnings.append("overrides.%s: %s differs from the interfaces %s" % (key, value, values["ifnames"]))
            if key == "NCCL_NET" and fabric in PROFILES and env.get(key) != value:
                warnings.append("overrides.NCCL_NET: %s bypasses the GPUDirect-%s network plugin" % (value, fabric.upper()))
        env[key] = value
    return warnings


# --------------------------------------------------------------------------------------------
# Output formats
# --------------------------------------------------------------------------------------------

def as_k8s_env(env):
    """A Kubernetes container ``env`` list (name/value, in the dict's order)."""
    return [dict(name=k, value=str(v)) for k, v in env.items()]


def _shell_quote(value):
    if value and re.match(r"^[A-Za-z0-9_@%+=:,./-]+\Z", value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def as_exports(env):
    """Shell ``export`` lines; LD_LIBRARY_PATH is appended to the current value, not replaced."""
    lines = []
    for key, value in env.items():
        if key in PATH_KEYS:
            lines.append('export %s="${%s:+${%s}:}"%s' % (key, key, key, _shell_quote(str(value))))
        else:
            lines.append("export %s=%s" % (key, _shell_quote(str(value))))
    return "".join(line + "\n" for line in lines)


NCCL_CONF_HEADER = (
    "# Managed by gpu_ops.cluster (nccl_env). NCCL reads this file at init;\n"
    "# variables already set in the environment win over it.\n"
)


def as_nccl_conf(env):
    """``nccl.conf`` text: the NCCL_* keys as KEY=VALUE lines (NCCL ignores the rest at init)."""
    body = "".join("%s=%s\n" % (k, v) for k, v in env.items() if k.startswith("NCCL_"))
    return NCCL_CONF_HEADER + body
