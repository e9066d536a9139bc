# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPUDirect catalog: one table per fact, read by modules, filters and roles.

Everything a role, module or filter needs to know about GPUDirect-TCPX (A3 High), GPUDirect-TCPXO
(A3 Mega) and GPUDirect-RDMA (A3 Ultra / A4, gIB NCCL plugin) lives here, once. Roles read it through
the ``gpu_ops.cluster.gpudirect_profile`` and ``gpu_ops.cluster.nccl_env`` filters; they never copy
a value.

Sources (see the shared research notes gke-gpudirect.md and the seed guide):
- machine types, accelerator labels, GPU-NIC counts, installer DaemonSets, RxDM daemon containers,
  NRI device injector, pod annotations: GoogleCloudPlatform/container-engine-accelerators (CEA)
  gpudirect-tcpx/, gpudirect-tcpxo/, gpudirect-rdma/, nri_device_injector/ manifests.
- MTU 8244: every peer (Cluster Toolkit multivpc, xpk, the GKE guide).
- minimum GKE patch versions: TCPX from the guide's requirements table as encoded by Cluster Toolkit
  (gpu_direct.tf, Sept 2024); TCPXO from CEA gpudirect-tcpxo/README.md "Recommended GKE versions"
  (latest entry per minor). No table was verified for RDMA: the gate accepts every version.
- image pairs: CEA gpudirect-tcpx/README.md (releases Feb 15 2024 and Jun 22 2026, the latter for
  GKE 1.34+ / devmem-TCP), gpudirect-tcpxo/README.md (Jan 9 2026), gpudirect-rdma/ manifests.
- NCCL environments: the guide's "recommended NCCL configuration" section (TCPX classic), CEA
  nccl-config.yaml after commit 0e5609b0 (TCPX GKE 1.34+), the TCPXO Jan 9 2026 release notes /
  nccl-env-profile.sh, the gIB ``set_nccl_env.sh`` values (A3 Ultra / A4), NCCL's documented
  variables for bare metal.
- bandwidth thresholds: Cluster Toolkit A3 High / A3 Mega validation playbooks (2 nodes, all_gather).
"""

from __future__ import annotations

import copy
import json
import re

DEFAULT_MTU = 8244
MTU_RANGE = (1300, 8896)  # compute.v1 Network.mtu

# --------------------------------------------------------------------------------------------
# Machines
# --------------------------------------------------------------------------------------------

# machine type -> facts of the machine (GKE node label values, GPUs per node, GPUDirect fabric)
MACHINES = {
    "a3-highgpu-8g": dict(description="A3 High", accelerator_type="nvidia-h100-80gb", gpus_per_node=8, fabric="tcpx"),
    "a3-megagpu-8g": dict(description="A3 Mega", accelerator_type="nvidia-h100-mega-80gb", gpus_per_node=8, fabric="tcpxo"),
    "a3-ultragpu-8g": dict(description="A3 Ultra", accelerator_type="nvidia-h200-141gb", gpus_per_node=8, fabric="rdma"),
    "a4-highgpu-8g": dict(description="A4", accelerator_type="nvidia-b200", gpus_per_node=8, fabric="rdma"),
}

# GKE node labels that identify a GPU node's hardware.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
MACHINE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# node labels / selectors that mean "this GPU is shared": GPUDirect refuses them.
GPU_SHARING_LABELS = (
    "cloud.google.com/gke-gpu-sharing-strategy",      # time-sharing or MPS
    "cloud.google.com/gke-max-shared-clients-per-gpu",
    "cloud.google.com/gke-gpu-partition-size",        # multi-instance GPU
)
GPU_RESOURCE = "nvidia.com/gpu"


def _profile_entry(fabric, machine_type, min_versions=(), **fields):
    """A profile: its own facts, its default machine's, and the minimum patch version of each GKE minor."""
    machine = MACHINES[machine_type]
    entry = dict(
        fabric=fabric,
        machine_type=machine_type,
        accelerator_type=machine["accelerator_type"],
        gpus_per_node=machine["gpus_per_node"],
        min_versions=dict((".".join(version.split(".")[:2]), version) for version in min_versions),
    )
    entry.update(fields)
    entry["machine_types"] = sorted(m for m, f in MACHINES.items() if f["fabric"] == fabric)
    entry["accelerator_types"] = sorted(set(MACHINES[m]["accelerator_type"] for m in entry["machine_types"]))
    return entry


# profile -> GKE facts. ``machine_type`` / ``accelerator_type`` name the profile's default machine;
# ``machine_types`` / ``accelerator_types`` list every machine of the profile. ``first_gpu_interface``:
# the pods' first GPU NIC is eth<n>. ``min_versions``: the oldest patch of each minor that works
# (none verified for RDMA, so its gate accepts every version).
PROFILES = {
    "tcpx": _profile_entry(
        "tcpx", "a3-highgpu-8g", description="GPUDirect-TCPX on A3 High",
        gpu_nic_count=4, device_mode="NetDevice", first_gpu_interface=1,
        min_versions=("1.27.7-gke.1121000", "1.28.8-gke.1095000", "1.29.3-gke.1093000", "1.30.2-gke.1023000")),
    "tcpxo": _profile_entry(
        "tcpxo", "a3-megagpu-8g", description="GPUDirect-TCPXO on A3 Mega",
        gpu_nic_count=8, device_mode="NetDevice", first_gpu_interface=1,
        min_versions=("1.28.11-gke.1289000", "1.29.6-gke.1254000", "1.30.4-gke.1129000", "1.31.1-gke.2008000",
                      "1.32.2-gke.1489001")),
    # eth1 is the node's second gVNIC; upstream pods attach eth2..eth9 to the RDMA networks
    "rdma": _profile_entry(
        "rdma", "a3-ultragpu-8g", description="GPUDirect-RDMA (RoCE, gIB NCCL plugin) on A3 Ultra and A4",
        gpu_nic_count=8, device_mode="RDMA", first_gpu_interface=2),
}

PROFILE_NAMES = sorted(PROFILES)

# Interface naming in GKE multi-network pods.
INTERFACE_PREFIX = "eth"
CONTROL_INTERFACE = "eth0"
DEFAULT_NETWORK = "default"

# Native sidecars (initContainers with restartPolicy: Always) need GKE >= 1.29 (TCPXO best-practice.md).
NATIVE_SIDECAR_MIN_GKE = "1.29"

# Two-node all_gather "# Avg bus bandwidth" pass thresholds (GB/s), Cluster Toolkit validation playbooks.
NCCL_BANDWIDTH_THRESHOLDS = {"tcpx": 25.0, "tcpxo": 30.0}

# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

DEFAULT_REGISTRY = "us-docker.pkg.dev/gce-ai-infra"


def _release(name, installer, daemon, **facts):
    """One release: ``installer`` and ``daemon`` are ``repository:tag`` under the default registry."""
    def image(reference):
        repository, tag = reference.rsplit(":", 1)
        return dict(repository=repository, tag=tag)
    entry = dict(name=name, installer=image(installer), daemon=image(daemon) if daemon else None)
    if "test" in facts:
        facts["test"] = image(facts["test"])
    entry.update(facts)
    return entry


# Coupled installer (NCCL plugin) + RxDM daemon pairs: the daemon version follows the installer's;
# upgrade the installer first; all pods of one workload use the same pair.
# ``gke_from``: first GKE minor the release is for (None: baseline). The newest release whose
# ``gke_from`` the cluster reaches is chosen.
RELEASES = {
    "tcpx": (
        _release("tcpx-v3.1.9", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
                 "gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                 released="2024-02-15", gke_from=None, nccl="2.19.3", nccl_env="classic"),
        # GKE 1.34: COS 125, kernel 6.12, upstream devmem-TCP
        _release("tcpx-v3.1.12", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.12",
                 "gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
                 released="2026-06-22", gke_from="1.34", nccl="2.19.4", nccl_env="devmem"),
    ),
    "tcpxo": (
        _release("tcpxo-v1.0.15", "gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
                 "gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
                 released="2026-01-09", gke_from=None, nccl="2.28.7-1", nccl_env="default"),
    ),
    "rdma": (
        # RDMA needs no RxDM sidecar; upstream states neither a release date nor the NCCL version
        _release("gib-v1.1.1", "gpudirect-gib/nccl-plugin-gib:v1.1.1", None,
                 test="gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1",
                 released=None, gke_from=None, nccl=None, nccl_env="default"),
    ),
}

# Infra images outside gce-ai-infra, each with the registry it is pulled from by default.
PAUSE_IMAGE = dict(
    registry="gke.gcr.io", repository="pause", tag="3.8",
    digest="sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830",
)
# Upstream runs the TCPXO pre-installation step in an unpinned ``ubuntu``; we pin it.
PRE_INSTALL_IMAGE = dict(
    registry="docker.io/library", repository="ubuntu", tag="24.04",
    digest="sha256:c4a8d5503dfb2a3eb8ab5f807da5bc69a85730fb49b5cfca2330194ebcc41c7b",
)

# --------------------------------------------------------------------------------------------
# DaemonSets: NCCL plugin installers and the NRI device injector
# --------------------------------------------------------------------------------------------

HOST_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
HOST_LIBRARY_DIR = HOST_NVIDIA_DIR + "/lib64"
CONTAINER_NVIDIA_DIR = "/usr/local/nvidia"
LIBRARY_DIR = CONTAINER_NVIDIA_DIR + "/lib64"   # where GPU containers find the plugin and NCCL


def _installer(profile_name, accelerators, **own):
    """An installer DaemonSet entry: what every upstream installer shares, plus its own fields."""
    name = "nccl-%s-installer" % profile_name
    entry = dict(
        name=name,
        namespace="kube-system",
        labels={"k8s-app": name},
        pod_labels={"name": name, "k8s-app": name},
        priority_class="system-node-critical",
        host_network=True,
        host_pid=True,
        node_label=ACCELERATOR_LABEL,
        accelerators=accelerators,
        extra_copies=[],                # further (src, dest) copies after copy_from -> copy_to
        cpu_request="150m",
        privileged=True,
        pre_install=None,
    )
    entry.update(own)
    return entry


def _classic_installer(profile_name, accelerators, **own):
    """TCPX and TCPXO: the plugin (and NCCL) go to the host's /home/kubernetes/bin/nvidia/lib64."""
    return _installer(
        profile_name, accelerators,
        # volume name -> host path (type None: unchecked)
        host_paths={"var-lib": dict(path="/var/lib", type=None),
                    "library-dir-host": dict(path="/home/kubernetes/bin", type=None)},
        mounts={"var-lib": "/var/lib", "library-dir-host": "/usr/local"},
        command=["/scripts/container_entry.sh", "install", "--install-nccl"],
        copy_from="/var/lib/%s/lib64/." % profile_name,
        copy_to=LIBRARY_DIR,            # host /home/kubernetes/bin/nvidia/lib64 through the mount
        **own)


INSTALLERS = {
    "tcpx": _classic_installer("tcpx", ["nvidia-h100-80gb"]),
    "tcpxo": _classic_installer(
        "tcpxo", ["nvidia-h100-mega-80gb"],
        # privileged step run in the host namespaces (nsenter -at 1) before the install
        pre_install=dict(
            name="pre-installation",
            iptables_rule="INPUT -p tcp -j ACCEPT",
            kernel_module="import-helper",
            pci_id="1ae0:0084",                  # GPU-NIC functions exposed as aperture devices
            aperture_dir="/dev/aperture_devices",
        )),
    "rdma": _installer(
        "rdma", ["nvidia-h200-141gb", "nvidia-b200"],
        host_paths={"library-dir-host": dict(path=HOST_LIBRARY_DIR, type="DirectoryOrCreate"),
                    "gib": dict(path="/home/kubernetes/bin/gib", type=None)},
        mounts={"library-dir-host": "/usr/local/home/kubernetes/bin/nvidia/lib64",
                "gib": "/usr/local/home/kubernetes/bin/gib"},
        # no --install-nccl since CEA commit 2da1c92f (May 2026): the workload keeps its own NCCL
        command=["/scripts/container_entry.sh", "install"],
        copy_from="/var/lib/gib/lib64/.",
        copy_to="/usr/local/home/kubernetes/bin/nvidia/lib64",
        # the gIB scripts (set_nccl_env.sh) and configs (tuner files) land in host /home/kubernetes/bin/gib
        extra_copies=[dict(src="/var/lib/gib/.", dest="/usr/local/home/kubernetes/bin/gib")]),
}

NRI_INJECTOR = dict(
    name="device-injector",
    namespace="kube-system",
    labels={"k8s-app": "device-injector", "name": "device-injector"},
    priority_class="system-node-critical",
    host_network=True,
    host_pid=True,
    node_label=ACCELERATOR_LABEL,
    accelerators=["nvidia-rtx-pro-6000", "nvidia-rtx-pro-6000-vws", "nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
    image=dict(registry="gcr.io/gke-release", repository="nri-device-injector", tag=None,
               digest="sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"),
    host_paths={"dev": dict(path="/dev", type=None), "nri": dict(path="/var/run/nri", type=None)},
    mounts={"dev": "/dev", "nri": "/var/run/nri"},
    cpu_request="150m",
    privileged=True,
    plugin_name="device_injector_nri",
    plugin_index=10,
    annotation_prefix="devices.gke.io/container.",
)

# --------------------------------------------------------------------------------------------
# Workload patch: RxDM daemon, devices, volumes, mounts
# --------------------------------------------------------------------------------------------

# Device nodes the NRI injector hands to the RxDM daemon (beyond /dev/nvidia0..N-1).
DAEMON_DEVICES = {
    "tcpx": ["/dev/nvidiactl", "/dev/nvidia-uvm"],
    "tcpxo": ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/dmabuf_import_helper"],
}

# The RxDM daemon container per profile (no daemon for rdma).
DAEMONS = {
    "tcpx": dict(
        name="tcpx-daemon",
        command=[
            "/tcpgpudmarxd/build/app/tcpgpudmarxd",
            "--gpu_nic_preset", "a3vm",
            "--gpu_shmem_type", "fd",
            "--uds_path", "/run/tcpx",
            "--setup_param", "--verbose 128 2 0 ",
        ],
        args=None,
        capabilities=["NET_ADMIN"],
        mounts=[("libraries", LIBRARY_DIR), ("tcpx-socket", "/run/tcpx"),
                ("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs")],
        env={"LD_LIBRARY_PATH": LIBRARY_DIR},
    ),
    "tcpxo": dict(
        name="tcpxo-daemon",
        command=["/bin/sh", "-c"],
        # --num_nics, --uid= and --alsologtostderr are deprecated since the open-source rebuild
        args=["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
              "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
        capabilities=["NET_ADMIN", "NET_BIND_SERVICE"],
        mounts=[("libraries", LIBRARY_DIR), ("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs")],
        env={"LD_LIBRARY_PATH": LIBRARY_DIR},
    ),
}

# Pod volumes per profile: name -> volume source. tcpx-socket is an emptyDir: the daemon and the
# GPU containers share it inside the pod, nothing on the host needs it.
WORKLOAD_VOLUMES = {
    "tcpx": [
        dict(name="libraries", hostPath=dict(path=HOST_LIBRARY_DIR)),
        dict(name="tcpx-socket", emptyDir={}),
        dict(name="sys", hostPath=dict(path="/sys")),
        dict(name="proc-sys", hostPath=dict(path="/proc/sys")),
    ],
    "tcpxo": [
        dict(name="libraries", hostPath=dict(path=HOST_LIBRARY_DIR)),
        dict(name="sys", hostPath=dict(path="/sys")),
        dict(name="proc-sys", hostPath=dict(path="/proc/sys")),
        dict(name="aperture-devices", hostPath=dict(path="/dev/aperture_devices")),
    ],
    "rdma": [
        dict(name="library-dir-host", hostPath=dict(path=HOST_NVIDIA_DIR)),
        dict(name="gib", hostPath=dict(path="/home/kubernetes/bin/gib")),
    ],
}

# Mounts added to every container that requests GPUs: (volume, mountPath, readOnly).
GPU_CONTAINER_MOUNTS = {
    "tcpx": [("tcpx-socket", "/tmp", False), ("libraries", LIBRARY_DIR, True)],
    "tcpxo": [("aperture-devices", "/dev/aperture_devices", False)],
    "rdma": [("library-dir-host", CONTAINER_NVIDIA_DIR, False), ("gib", "/usr/local/gib", False)],
}

# LD_LIBRARY_PATH entry every GPU container needs, per fabric.
LIBRARY_PATHS = {"tcpx": LIBRARY_DIR, "tcpxo": LIBRARY_DIR, "rdma": LIBRARY_DIR}

# --------------------------------------------------------------------------------------------
# NCCL environments
# --------------------------------------------------------------------------------------------

FABRICS = ("tcpx", "tcpxo", "rdma", "ib", "roce", "socket")
BARE_METAL_FABRICS = ("ib", "roce", "socket")

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
GIB_ENV_SCRIPT = "/usr/local/gib/scripts/set_nccl_env.sh"
TCPXO_ENV_SCRIPT = LIBRARY_DIR + "/nccl-env-profile.sh"

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

_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
_GKE_MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------

def profile(name):
    """The catalog entry of a profile; ValueError naming the allowed values otherwise."""
    if name not in PROFILES:
        raise ValueError("unknown GPUDirect profile %r; allowed: %s" % (name, ", ".join(PROFILE_NAMES)))
    return PROFILES[name]


def parse_gke_version(version):
    """(major, minor, patch, gke_build) of a full GKE version such as 1.30.4-gke.1129000."""
    match = _GKE_VERSION.match(version or "")
    if not match:
        raise ValueError("%r is not a full GKE version (MAJOR.MINOR.PATCH-gke.BUILD, e.g. 1.30.4-gke.1129000)" % (version,))
    return tuple(int(part) for part in match.groups())


def gke_minor(version):
    """(major, minor) of a GKE or Kubernetes version: 1.34, 1.34.1, 1.34.1-gke.1829001, v1.30.4-gke.1129000."""
    match = _GKE_MINOR.match(str(version or "").strip())
    if not match:
        raise ValueError("%r is not a GKE version (e.g. 1.34, 1.34.1-gke.1829001 or v1.34.1-gke.1829001)" % (version,))
    return int(match.group(1)), int(match.group(2))


def _minor_tuple(minor):
    return tuple(int(p) for p in minor.split("."))


def version_gate_error(profile_name, version):
    """Why ``version`` is too old for the profile, or None when it is new enough.

    Minors below the table's first minor are refused; minors above its last are accepted; a profile
    without a table accepts every version.
    """
    entry = profile(profile_name)
    wanted = parse_gke_version(version)
    if not entry["min_versions"]:
        return None
    minors = sorted(entry["min_versions"], key=_minor_tuple)
    first = _minor_tuple(minors[0])
    minor = "%d.%d" % wanted[:2]
    if wanted[:2] < first:
        return "GKE %s is older than %s, the first minor that supports %s (%s)" % (
            version, minors[0], profile_name, entry["min_versions"][minors[0]])
    minimum = entry["min_versions"].get(minor)
    if minimum and wanted < parse_gke_version(minimum):
        return "GKE %s is below the minimum %s for %s on %s" % (version, minimum, profile_name, minor)
    return None


def native_sidecar_supported(gke_version):
    """Whether a cluster of ``gke_version`` runs native sidecars (GKE >= 1.29)."""
    return gke_minor(gke_version) >= _minor_tuple(NATIVE_SIDECAR_MIN_GKE)


def machine(machine_type):
    """The catalog entry of a machine type; ValueError naming the allowed values otherwise."""
    if machine_type not in MACHINES:
        raise ValueError("unknown machine type %r; allowed: %s" % (machine_type, ", ".join(sorted(MACHINES))))
    return MACHINES[machine_type]


def profile_machine(profile_name, machine_type=None):
    """The machine type to use for a profile: ``machine_type`` checked, or the profile's default."""
    entry = profile(profile_name)
    if machine_type is None:
        return entry["machine_type"]
    if machine_type not in entry["machine_types"]:
        raise ValueError("machine type %r does not run %s; allowed: %s" % (
            machine_type, profile_name, ", ".join(entry["machine_types"])))
    return machine_type


def image_ref(image, registry=None):
    """``registry/repository[:tag][@digest]`` of a catalog image; ``registry`` replaces its default
    registry (a private mirror keeps the upstream repository path under it)."""
    if image is None:
        return None
    base = (registry or image.get("registry") or DEFAULT_REGISTRY).rstrip("/")
    ref = "%s/%s" % (base, image["repository"])
    if image.get("tag"):
        ref += ":" + image["tag"]
    if image.get("digest"):
        ref += "@" + image["digest"]
    return ref


def release(profile_name, gke_version=None):
    """The installer/daemon release for a profile on a GKE version (the baseline when unknown)."""
    releases = RELEASES[profile(profile_name)["fabric"]]
    chosen = releases[0]
    if gke_version is not None:
        wanted = gke_minor(gke_version)
        for candidate in releases:
            if candidate["gke_from"] is None or wanted >= _minor_tuple(candidate["gke_from"]):
                chosen = candidate
    return chosen


def images(profile_name, gke_version=None, registry=None):
    """Every image reference a profile needs, resolved (``registry`` overrides all registries)."""
    rel = release(profile_name, gke_version)
    installer = INSTALLERS[profile_name]
    return dict(
        installer=image_ref(rel["installer"], registry),
        daemon=image_ref(rel["daemon"], registry),
        test=image_ref(rel.get("test") or rel["installer"], registry),
        pause=image_ref(PAUSE_IMAGE, registry),
        pre_install=image_ref(PRE_INSTALL_IMAGE, registry) if installer["pre_install"] else None,
        nri_injector=image_ref(NRI_INJECTOR["image"], registry),
    )


def interface_names(profile_name, count=None):
    """Default GPU interface names of a profile's pods: eth1..eth4 (tcpx), eth1..eth8 (tcpxo), eth2..eth9 (rdma)."""
    entry = profile(profile_name)
    count = entry["gpu_nic_count"] if count is None else count
    first = entry["first_gpu_interface"]
    return ["%s%d" % (INTERFACE_PREFIX, first + i) for i in range(count)]


def device_annotation(profile_name):
    """(annotation key, YAML value) of the NRI device annotation for the profile's RxDM daemon, or None."""
    if profile_name not in DAEMONS:
        return None
    entry = profile(profile_name)
    paths = ["/dev/nvidia%d" % i for i in range(entry["gpus_per_node"])] + DAEMON_DEVICES[profile_name]
    key = NRI_INJECTOR["annotation_prefix"] + DAEMONS[profile_name]["name"]
    return key, "".join("- path: %s\n" % p for p in paths)


def interfaces_annotation(profile_name, network_names, interfaces=None):
    """The ``networking.gke.io/interfaces`` value (JSON text) for Network objects ``network_names``."""
    names = list(interfaces) if interfaces else interface_names(profile_name, len(network_names))
    if len(names) != len(network_names):
        raise ValueError("%d interfaces for %d networks" % (len(names), len(network_names)))
    entries = [{"interfaceName": CONTROL_INTERFACE, "network": DEFAULT_NETWORK}]
    entries.extend({"interfaceName": i, "network": n} for i, n in zip(names, network_names))
    return json.dumps(entries, separators=(",", ":"))


def describe(profile_name, gke_version=None, registry=None):
    """Everything a role needs to know about a profile, resolved for a GKE version and a registry."""
    entry = copy.deepcopy(profile(profile_name))
    rel = release(profile_name, gke_version)
    entry["name"] = profile_name
    entry["release"] = dict((k, v) for k, v in rel.items() if k not in ("installer", "daemon", "test"))
    entry["images"] = images(profile_name, gke_version, registry)
    entry["installer"] = copy.deepcopy(INSTALLERS[profile_name])
    entry["nri_injector"] = copy.deepcopy(NRI_INJECTOR) if profile_name in DAEMONS else None
    daemon = copy.deepcopy(DAEMONS.get(profile_name))
    annotation = device_annotation(profile_name)
    if daemon:
        daemon["mounts"] = [dict(name=n, mountPath=p) for n, p in daemon["mounts"]]
        daemon["device_annotation"] = dict(key=annotation[0], value=annotation[1])
    entry["daemon"] = daemon
    entry["volumes"] = copy.deepcopy(WORKLOAD_VOLUMES[profile_name])
    entry["gpu_container_mounts"] = [dict(name=n, mountPath=p, readOnly=r) for n, p, r in GPU_CONTAINER_MOUNTS[profile_name]]
    entry["library_path"] = LIBRARY_PATHS[profile_name]
    entry["interfaces"] = interface_names(profile_name)
    entry["control_interface"] = CONTROL_INTERFACE
    entry["nccl_bandwidth_threshold"] = NCCL_BANDWIDTH_THRESHOLDS.get(profile_name)
    entry["nccl_env_script"] = {"tcpxo": TCPXO_ENV_SCRIPT, "rdma": GIB_ENV_SCRIPT}.get(profile_name)
    entry["native_sidecar_min_gke"] = NATIVE_SIDECAR_MIN_GKE
    entry["native_sidecar"] = native_sidecar_supported(gke_version) if gke_version else None
    entry["mtu"] = DEFAULT_MTU
    return entry


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
    if fabric in PROFILES and gke_version is None and len(RELEASES[fabric]) > 1:
        warnings.append(
            "gke_version not given: using the %s NCCL set of %s; GKE %s+ uses the %s set" % (
                variant, fabric, RELEASES[fabric][-1]["gke_from"], RELEASES[fabric][-1]["nccl_env"]))
    values = dict(libdir=LIBRARY_DIR)

    if interfaces is not None:
        if isinstance(interfaces, str):
            interfaces = [i.strip() for i in interfaces.split(",") if i.strip()]
        interfaces = list(interfaces)
        for name in interfaces:
            if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.:=@-]+$", name):
                raise ValueError("interfaces: %r is not an interface name" % (name,))
        if len(set(interfaces)) != len(interfaces):
            raise ValueError("interfaces: names repeat: %s" % ", ".join(interfaces))

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
    constraints = GUEST_CONFIG_CONSTRAINTS.get(fabric, {})
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
            elif owner and owner != fabric:
                warnings.append("overrides.%s: belongs to the %s plugin and has no effect on %s" % (key, owner, fabric))
            if rule and rule["action"] == "warn" and env.get(key) != value:
                warnings.append("overrides.%s: %s" % (key, rule["reason"]))
            if key in dropped:
                warnings.append("overrides.%s: %s" % (key, dropped[key]))
            if key in ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_FASTRAK_IFNAME") and values.get("ifnames") \
                    and value != values["ifnames"] and owner == fabric:
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
    if value and re.match(r"^[A-Za-z0-9_@%+=:,./-]+$", value):
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


# --------------------------------------------------------------------------------------------
# Workload patch (the guide's "add GPUDirect to your manifests")
# --------------------------------------------------------------------------------------------

WORKLOAD_KINDS = {
    # kind -> (apiVersion, path to the pod template(s))
    "Pod": ("v1", None),
    "Job": ("batch/v1", ("spec", "template")),
    "Deployment": ("apps/v1", ("spec", "template")),
    "StatefulSet": ("apps/v1", ("spec", "template")),
    "JobSet": ("jobset.x-k8s.io/v1alpha2", None),
}
SIDECAR_MODES = ("auto", "native", "classic")
# Pod annotation listing the env keys the patch manages (so a re-patch can update or drop them).
MANAGED_ENV_ANNOTATION = "gpu-ops.cluster/gpudirect-env"
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class WorkloadError(ValueError):
    """A manifest the GPUDirect patch refuses, with the reason."""


def _network_names(network_names, entry, fabric):
    if not isinstance(network_names, (list, tuple)):
        raise WorkloadError("network_names: a list of %d Network names is required" % entry["gpu_nic_count"])
    names = []
    for item in network_names:
        if isinstance(item, dict):  # a Network object as read from the cluster
            item = (item.get("metadata") or {}).get("name")
        if not isinstance(item, str) or len(item) > 253 or not _DNS_SUBDOMAIN.match(item):
            raise WorkloadError("network_names: %r is not a Network object name" % (item,))
        if item == DEFAULT_NETWORK:
            raise WorkloadError("network_names: %r is the pod network; list the GPU NIC networks only" % item)
        names.append(item)
    if len(names) != entry["gpu_nic_count"]:
        raise WorkloadError("network_names: %s needs %d GPU NIC networks, %d given" % (
            fabric, entry["gpu_nic_count"], len(names)))
    if len(set(names)) != len(names):
        raise WorkloadError("network_names: names repeat: %s" % ", ".join(names))
    return names


def _pod_templates(manifest):
    """[(where, template)] of a manifest; template is the dict holding metadata + spec."""
    kind = manifest.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise WorkloadError("kind %r is not supported; supported: %s" % (kind, ", ".join(sorted(WORKLOAD_KINDS))))
    api_version, path = WORKLOAD_KINDS[kind]
    if manifest.get("apiVersion") != api_version:
        raise WorkloadError("%s must have apiVersion %s, not %r" % (kind, api_version, manifest.get("apiVersion")))
    name = (manifest.get("metadata") or {}).get("name", "?")
    if kind == "Pod":
        return [("Pod/%s" % name, manifest)]
    if kind == "JobSet":
        jobs = (manifest.get("spec") or {}).get("replicatedJobs")
        if not isinstance(jobs, list) or not jobs:
            raise WorkloadError("JobSet/%s has no spec.replicatedJobs" % name)
        found = []
        for index, job in enumerate(jobs):
            template = (((job or {}).get("template") or {}).get("spec") or {}).get("template")
            if not isinstance(template, dict):
                raise WorkloadError("JobSet/%s spec.replicatedJobs[%d] has no template.spec.template" % (name, index))
            found.append(("JobSet/%s replicatedJobs[%s]" % (name, job.get("name", index)), template))
        return found
    template = manifest
    for part in path:
        template = template.get(part) if isinstance(template, dict) else None
    if not isinstance(template, dict):
        raise WorkloadError("%s/%s has no spec.template" % (kind, name))
    return [("%s/%s" % (kind, name), template)]


def _gpu_count(container):
    resources = container.get("resources") or {}
    counts = []
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(GPU_RESOURCE)
        if value is not None:
            try:
                counts.append(int(str(value)))
            except ValueError:
                raise WorkloadError("container %s: %s %s %r is not a whole number" % (
                    container.get("name"), section, GPU_RESOURCE, value))
    if len(counts) == 2 and counts[0] != counts[1]:
        raise WorkloadError("container %s: %s limits (%d) and requests (%d) differ" % (
            container.get("name"), GPU_RESOURCE, counts[0], counts[1]))
    return counts[0] if counts else 0


def _selector_values(spec, key):
    """Values a pod spec requires for a node label (nodeSelector and required node affinity)."""
    values = []
    selector = spec.get("nodeSelector") or {}
    if key in selector:
        values.append(str(selector[key]))
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in (term or {}).get("matchExpressions") or []:
            if expr.get("key") == key and expr.get("operator") in ("In", "Exists"):
                values.extend(str(v) for v in expr.get("values") or ["*"])
    return values


def sharing_refusal(fabric):
    """Why a GPUDirect fabric refuses GPU sharing: the one rule for workloads, node pools and the mps role."""
    return "GPUDirect-%s needs whole nodes, not MPS, time-sharing or multi-instance GPUs" % fabric.upper()


def node_fabric(labels):
    """The GPUDirect fabric of a node's machine type (its instance-type label), else None.

    The accelerator label alone does not tell: a3-highgpu-1g carries the same H100 as the
    TCPX machine a3-highgpu-8g.
    """
    facts = MACHINES.get((labels or {}).get(MACHINE_TYPE_LABEL))
    return facts["fabric"] if facts and facts["fabric"] in PROFILES else None


def _check_template(where, template, entry, fabric, daemon_name):
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise WorkloadError("%s: no pod spec" % where)
    if spec.get("hostNetwork"):
        raise WorkloadError("%s: hostNetwork pods cannot use the multi-network annotations; "
                            "remove hostNetwork: true" % where)
    for key in GPU_SHARING_LABELS:
        if _selector_values(spec, key):
            raise WorkloadError("%s: selects shared GPUs (%s); %s" % (where, key, sharing_refusal(fabric)))
    for value in _selector_values(spec, ACCELERATOR_LABEL):
        if value != "*" and value not in entry["accelerator_types"]:
            raise WorkloadError("%s: selects %s=%s but %s runs on %s" % (
                where, ACCELERATOR_LABEL, value, fabric, ", ".join(entry["accelerator_types"])))
    for value in _selector_values(spec, MACHINE_TYPE_LABEL):
        if value != "*" and value not in entry["machine_types"]:
            raise WorkloadError("%s: selects %s=%s but %s runs on %s" % (
                where, MACHINE_TYPE_LABEL, value, fabric, ", ".join(entry["machine_types"])))
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise WorkloadError("%s: no containers" % where)
    gpus = sum(_gpu_count(c) for c in containers if c.get("name") != daemon_name)
    for init in spec.get("initContainers") or []:
        if init.get("name") != daemon_name and _gpu_count(init):
            raise WorkloadError("%s: init container %s requests GPUs; only regular containers may" % (
                where, init.get("name")))
    return gpus


def _machine_from_template(spec, fabric):
    for value in _selector_values(spec, MACHINE_TYPE_LABEL):
        if value in MACHINES:
            return value
    for value in _selector_values(spec, ACCELERATOR_LABEL):
        matches = [m for m in PROFILES[fabric]["machine_types"] if MACHINES[m]["accelerator_type"] == value]
        if matches:
            return matches[0]
    return None


def _ensure_volume(where, volumes, wanted):
    for volume in volumes:
        if volume.get("name") == wanted["name"]:
            if volume != wanted:
                raise WorkloadError("%s: volume %s exists with another source (%s); rename it" % (
                    where, wanted["name"], json.dumps(volume, sort_keys=True)))
            return
    volumes.append(copy.deepcopy(wanted))


def _ensure_mount(where, container, name, path, read_only):
    mounts = container.setdefault("volumeMounts", [])
    for mount in mounts:
        if mount.get("mountPath") == path:
            if mount.get("name") != name:
                raise WorkloadError("%s: container %s already mounts volume %s at %s" % (
                    where, container.get("name"), mount.get("name"), path))
            return
    mount = dict(name=name, mountPath=path)
    if read_only:
        mount["readOnly"] = True
    mounts.append(mount)


def _merge_env(where, container, env, previous, warnings):
    """Set ``env`` in a container. Keys the previous patch managed are replaced or dropped; keys the
    user set stay (LD_LIBRARY_PATH gets the library directory appended). Returns the user's keys."""
    owned = set()
    entries = container.setdefault("env", [])
    by_name = dict((e.get("name"), e) for e in entries)
    for key in previous:
        if key not in env and key in by_name:
            entries.remove(by_name.pop(key))
    for key, value in env.items():
        existing = by_name.get(key)
        if existing is None:
            entry = dict(name=key, value=value)
            entries.append(entry)
            by_name[key] = entry
        elif key in previous:
            existing.pop("valueFrom", None)
            existing["value"] = value
        elif key in PATH_KEYS:
            owned.add(key)
            if "valueFrom" in existing:
                raise WorkloadError("%s: container %s sets %s from valueFrom; set it as a value that "
                                    "includes %s" % (where, container.get("name"), key, value))
            parts = [p for p in str(existing.get("value", "")).split(":") if p]
            if value not in parts:
                existing["value"] = ":".join(parts + [value])
        else:
            owned.add(key)
            if existing.get("value") != value:
                warnings.append("%s: container %s keeps its own %s=%s (recommended: %s)" % (
                    where, container.get("name"), key, existing.get("value", "<valueFrom>"), value))
    if not entries:
        container.pop("env")
    return owned


def _daemon_container(fabric, image):
    spec = DAEMONS[fabric]
    container = dict(name=spec["name"], image=image, command=list(spec["command"]))
    if spec["args"]:
        container["args"] = list(spec["args"])
    container["securityContext"] = dict(capabilities=dict(add=list(spec["capabilities"])))
    container["volumeMounts"] = [dict(name=n, mountPath=p) for n, p in spec["mounts"]]
    container["env"] = [dict(name=k, value=v) for k, v in spec["env"].items()]
    return container


def patch_workload(manifest, fabric, network_names, gke_version=None, sidecar="auto", registry=None,
                   machine_type=None, interfaces=None, nccl_overrides=None, warnings=None):
    """A copy of a Pod/Job/JobSet/Deployment/StatefulSet manifest with GPUDirect added.

    Adds what the guide's "add GPUDirect to your manifests" section adds: the NRI device annotation
    (tcpx, tcpxo), the multi-network annotations built from ``network_names`` (the Network objects'
    names, in GPU NIC order), the RxDM daemon as a native sidecar (GKE >= 1.29 or ``sidecar:
    native``) or a classic sidecar, the volumes, the GPU containers' mounts, LD_LIBRARY_PATH and the
    NCCL environment of ``nccl_environment``. Applying it to its own output changes nothing.

    Refuses (WorkloadError) unknown kinds, pods that ask for other than all GPUs of the node,
    shared GPUs (MPS, time-sharing, MIG node selectors), hostNetwork pods, and conflicting volumes or
    mounts. ``warnings`` (a list) receives the warnings.
    """
    warnings = [] if warnings is None else warnings
    if fabric not in PROFILES:
        raise WorkloadError("fabric: %r has no GKE workload patch; allowed: %s" % (fabric, ", ".join(PROFILE_NAMES)))
    if sidecar not in SIDECAR_MODES:
        raise WorkloadError("sidecar: %r is not one of %s" % (sidecar, ", ".join(SIDECAR_MODES)))
    if not isinstance(manifest, dict):
        raise WorkloadError("the manifest must be a mapping, not %s" % type(manifest).__name__)
    entry = PROFILES[fabric]
    names = _network_names(network_names, entry, fabric)
    if gke_version is not None:
        try:
            gke_minor(gke_version)
        except ValueError as exc:
            raise WorkloadError("gke_version: %s" % exc)
    native = sidecar == "native"
    if sidecar == "auto":
        native = gke_version is None or native_sidecar_supported(gke_version)
    elif native and gke_version is not None and not native_sidecar_supported(gke_version):
        raise WorkloadError("sidecar: native sidecars need GKE >= %s, the cluster runs %s" % (
            NATIVE_SIDECAR_MIN_GKE, gke_version))
    daemon_name = DAEMONS[fabric]["name"] if fabric in DAEMONS else None
    daemon_image = image_ref(release(fabric, gke_version)["daemon"], registry) if daemon_name else None

    result = copy.deepcopy(manifest)
    templates = _pod_templates(result)
    patched = 0
    for where, template in templates:
        gpus = _check_template(where, template, entry, fabric, daemon_name)
        if gpus == 0 and result["kind"] == "JobSet" and len(templates) > 1:
            continue  # a coordinator/driver job without GPUs stays as it is
        if gpus != entry["gpus_per_node"]:
            raise WorkloadError(
                "%s: requests %d of the %d GPUs of a %s node; GPUDirect-%s needs all GPUs of the node "
                "(one pod per node)" % (where, gpus, entry["gpus_per_node"], entry["machine_type"], fabric.upper()))
        spec = template["spec"]
        kind_machine = machine_type or _machine_from_template(spec, fabric)
        env_warnings = []
        try:
            env, env_warnings = nccl_environment(fabric, gke_version, kind_machine, interfaces, nccl_overrides)
        except ValueError as exc:
            raise WorkloadError(str(exc))
        for message in env_warnings:
            if message not in warnings:
                warnings.append(message)
        used_interfaces = list(interfaces) if interfaces else interface_names(fabric)

        metadata = template.setdefault("metadata", {})
        annotations = metadata.setdefault("annotations", {})
        previous = [k for k in str(annotations.get(MANAGED_ENV_ANNOTATION, "")).split(",") if k]
        device = device_annotation(fabric)
        if device:
            annotations[device[0]] = device[1]
        annotations[DEFAULT_INTERFACE_ANNOTATION] = CONTROL_INTERFACE
        annotations[INTERFACES_ANNOTATION] = interfaces_annotation(fabric, names, used_interfaces)

        volumes = spec.setdefault("volumes", [])
        for volume in WORKLOAD_VOLUMES[fabric]:
            _ensure_volume(where, volumes, volume)

        owned = set()
        for container in spec["containers"]:
            if container.get("name") == daemon_name or not _gpu_count(container):
                continue
            for name, path, read_only in GPU_CONTAINER_MOUNTS[fabric]:
                _ensure_mount(where, container, name, path, read_only)
            owned |= _merge_env(where, container, env, previous, warnings)
        annotations[MANAGED_ENV_ANNOTATION] = ",".join(k for k in env if k not in owned)

        if daemon_name:
            spec["containers"] = [c for c in spec["containers"] if c.get("name") != daemon_name]
            inits = [c for c in spec.get("initContainers") or [] if c.get("name") != daemon_name]
            daemon = _daemon_container(fabric, daemon_image)
            if native:
                daemon["restartPolicy"] = "Always"
                inits.insert(0, daemon)
            else:
                spec["containers"].append(daemon)
                if result["kind"] in ("Job", "JobSet"):
                    message = ("%s: the classic %s sidecar keeps running after the main container exits, so "
                               "the Job does not complete on its own; use GKE >= %s for a native sidecar" % (
                                   where, daemon_name, NATIVE_SIDECAR_MIN_GKE))
                    warnings.append(message)
            if inits:
                spec["initContainers"] = inits
            else:
                spec.pop("initContainers", None)
        patched += 1
    if not patched:
        raise WorkloadError("%s/%s: no pod template requests GPUs" % (
            result["kind"], (result.get("metadata") or {}).get("name", "?")))
    return result
