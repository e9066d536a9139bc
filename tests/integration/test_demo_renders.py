# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RDMA demo renders (issue 21 "Show it"): ``make demo-rdma`` and ``make demo-rdma-a4x``.

- they run the Makefile's commands against inventories/gke-rdma with no credential anywhere (no ADC file, no
  gcloud config, a closed metadata server, no kubeconfig) and write nothing outside the render folder;
- the key fields of each render, read from the raw request and manifest files;
- README's table (scripts/gen_demo_renders.py) is what the two renders give today, so it cannot go stale.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, make_runner

PLAYBOOK = str(REPO_ROOT / "playbooks" / "gke_gpudirect.yml")
MAKE_TARGETS = {"demo-rdma": "a3ultra-demo", "demo-rdma-a4x": "a4x-demo"}


def _generator():
    spec = importlib.util.spec_from_file_location("gen_demo_renders", str(REPO_ROOT / "scripts" / "gen_demo_renders.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recipe(target):
    """The command lines of a Makefile target."""
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^%s:.*\n((?:\t.*\n)+)" % re.escape(target), makefile, re.M)
    assert match, "Makefile has no target %s" % target
    return [line.strip() for line in match.group(1).splitlines()]


@pytest.fixture(scope="module")
def renders(tmp_path_factory):
    """Each demo target's render: {target: (folder, result, home)}; one playbook run per target, as make runs it."""
    out = {}
    for target, host in MAKE_TARGETS.items():
        work = tmp_path_factory.mktemp(target)
        home = work / "home"
        home.mkdir()
        env = {"HOME": str(home), "GOOGLE_APPLICATION_CREDENTIALS": str(work / "no-such-adc.json"),
               "CLOUDSDK_CONFIG": str(home / "gcloud"), "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9",
               "KUBECONFIG": str(work / "no-such-kubeconfig"), "GOOGLE_OAUTH_ACCESS_TOKEN": ""}
        folder = work / "rendered"
        result = make_runner(work)(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(folder)}, env=env,
                                   extra_args=("-i", str(REPO_ROOT / "inventories" / "gke-rdma"), "--limit", host))
        result.assert_ok()
        out[target] = (folder, result, home)
    return out


def _requests(folder):
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((folder / "requests").iterdir())]


def _pool(folder):
    return [r for r in _requests(folder) if "/nodePools" in r["url"]][-1]["body"]["nodePool"]


def _objects(folder, step):
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((folder / "manifests" / step).iterdir())]


def test_the_makefile_targets_run_what_this_test_renders():
    for target, host in MAKE_TARGETS.items():
        [command] = [line for line in _recipe(target) if "ansible-playbook" in line]
        words = command.split()
        assert words[words.index("-i") + 1] == "inventories/gke-rdma" and words[words.index("--limit") + 1] == host
        assert "playbooks/gke_gpudirect.yml" in words and any(w.startswith("gpu_ops_render_dir=") for w in words)


def test_the_renders_need_no_credentials_and_write_only_their_folder(renders):
    for target, (folder, result, home) in renders.items():
        assert "RENDER MODE: nothing was created, changed or deleted" in result.stdout, target
        assert (folder / "PLAN.md").is_file() and (folder / ".gpu_ops_render").is_file()
        assert list(home.rglob("*")) == [], "%s wrote into HOME: %s" % (target, list(home.rglob("*")))


def test_a3_ultra_render_has_the_roce_fabric_and_an_rdma_pool(renders):
    folder = renders["demo-rdma"][0]
    networks = [r["body"] for r in _requests(folder) if r["url"].endswith("/global/networks")]
    assert [n["mtu"] for n in networks] == [8896, 8896]
    [roce] = [n for n in networks if "networkProfile" in n]
    assert roce["networkProfile"] == "projects/my-gpu-project/global/networkProfiles/us-central1-c-vpc-roce"
    pool = _pool(folder)
    assert pool["config"]["machineType"] == "a3-ultragpu-8g"
    assert pool["config"]["gpuDirectConfig"] == {"gpuDirectStrategy": "RDMA"}
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 9
    modes = [o["spec"]["deviceMode"] for o in _objects(folder, "20-gke-gpu-networks") if o["kind"] == "GKENetworkParamSet"]
    assert modes == ["NetDevice"] + ["RDMA"] * 8


def test_a4x_render_has_four_rdma_nics_hyperdisk_and_the_arm64_installer(renders):
    folder = renders["demo-rdma-a4x"][0]
    pool = _pool(folder)
    assert pool["config"]["machineType"] == "a4x-highgpu-4g" and pool["config"]["diskType"] == "hyperdisk-balanced"
    assert "gpuDirectConfig" not in pool["config"]
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 5
    [daemonset] = _objects(folder, "30-gpudirect-rdma-a4x-installer")
    images = [c["image"] for c in daemonset["spec"]["template"]["spec"]["initContainers"]]
    assert any("/gpudirect-gib/nccl-plugin-gib-arm64:" in i and "@sha256:" in i for i in images), images


# What GKE taints the demo pools' nodes with (written here from GKE's docs, not read from the catalog): every GPU node,
# and the arm64 hosts of A4X
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
ARM64_TAINT = ("kubernetes.io/arch", "arm64", "NoSchedule")
NODE_TAINTS = {"demo-rdma": [GPU_TAINT], "demo-rdma-a4x": [GPU_TAINT, ARM64_TAINT]}


def _pod_specs(folder):
    """(file, pod spec) of every manifest of a render that places pods (a Pod, or any object with a pod template)."""
    found = []
    for path in sorted((folder / "manifests").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "Pod":
                found.append((path.name, doc["spec"]))
            template = (doc.get("spec") or {}).get("template")
            if isinstance(template, dict) and "spec" in template:
                found.append((path.name, template["spec"]))
    return found


def _tolerated(taint, tolerations):
    key, value, effect = taint
    for one in tolerations or []:
        if one.get("effect") not in (None, effect):
            continue
        if one.get("operator") == "Exists" and one.get("key") in (None, key):
            return True
        if one.get("key") == key and one.get("operator", "Equal") == "Equal" and one.get("value") == value:
            return True
    return False


@pytest.mark.parametrize("target", sorted(NODE_TAINTS))
def test_every_rendered_pod_tolerates_the_taints_of_its_nodes(renders, target):
    specs = _pod_specs(renders[target][0])
    kinds = set(name.split("-", 2)[1] for name, _spec in specs)
    assert {"pod", "daemonset"} <= kinds, kinds
    missing = ["%s: %s=%s:%s" % ((name,) + taint) for name, spec in specs for taint in NODE_TAINTS[target]
               if not _tolerated(taint, spec.get("tolerations"))]
    assert not missing, "pods that never schedule on their nodes: %s" % "; ".join(missing)


def test_the_toleration_check_catches_a_pod_without_the_arm64_one():
    assert not _tolerated(ARM64_TAINT, [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert not _tolerated(ARM64_TAINT, [{"key": "kubernetes.io/arch", "operator": "Equal", "value": "amd64"}])
    assert _tolerated(ARM64_TAINT, [{"operator": "Exists"}])


def test_readme_table_is_what_the_renders_give_today(renders):
    generator = _generator()
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    generated = generator.table([generator.summarize(str(renders[target][0])) for target, _folder, _title in generator.DEMOS])
    assert generator.readme_block(readme) == generated, \
        "README.md's RDMA demo table is stale: make demo-rdma demo-rdma-a4x; python3 scripts/gen_demo_renders.py"


def test_a_stale_readme_table_is_caught(renders):
    generator = _generator()
    summary = generator.summarize(str(renders["demo-rdma"][0]))
    older = dict(summary, node_networks=summary["node_networks"] - 1)
    assert generator.table([older]) != generator.table([summary])
    block = generator.readme_block("x\n%s\n%s%s\ny" % (generator.BEGIN, generator.table([older]), generator.END))
    assert block == generator.table([older]) and block != generator.table([summary])
