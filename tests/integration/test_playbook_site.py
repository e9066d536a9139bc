# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The main job (`make demo`): site.yml with inventories/local renders the whole A3 Mega plan, and
everything it writes passes the official schemas."""

from __future__ import annotations

import json
from urllib.parse import urlsplit, parse_qsl

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.contract import discovery, k8s_validation
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import render_playbook

GPU_NICS = 8  # A3 Mega (TCPXO)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Run the demo once for this module; the render folder it wrote."""
    return render_playbook(tmp_path_factory, "site.yml", "local", "site")


def _api_of(url):
    """(api, version, path from the API root, query) of a rendered Google API request URL."""
    parts = urlsplit(url)
    path = parts.path.lstrip("/")
    if path.startswith("compute/"):
        return "compute", path.split("/")[1], path, dict(parse_qsl(parts.query))
    return "container", path.split("/")[0], path, dict(parse_qsl(parts.query))


def test_every_request_matches_the_discovery_documents(rendered):
    out, dummy = rendered
    files = sorted((out / "requests").iterdir())
    assert files, "no request was rendered"
    for path in files:
        request = json.loads(path.read_text())
        api, version, api_path, query = _api_of(request["url"])
        problems = discovery.discovery(api, version).validate_request(request["method"], api_path, request["body"], query)
        assert problems == [], "%s: %s" % (path.name, problems)


def test_requests_come_in_dependency_order(rendered):
    out, dummy = rendered
    created = []  # (collection, name, body) in request order
    for path in sorted((out / "requests").iterdir()):
        request = json.loads(path.read_text())
        body = request["body"]
        created.append((urlsplit(request["url"]).path.rstrip("/").split("/")[-1],
                        body.get("name") or next(iter(body.values()), {}).get("name"), body))
    names = [name for dummy, name, dummy in created]
    kinds = [kind for kind, dummy, dummy in created]
    assert kinds.count("networks") == GPU_NICS
    assert kinds.count("subnetworks") == GPU_NICS and kinds.count("firewalls") == GPU_NICS
    # each subnet and firewall after the network it belongs to
    for index, (kind, name, body) in enumerate(created):
        if kind in ("subnetworks", "firewalls"):
            network = body["network"].rstrip("/").split("/")[-1]
            assert network in names[:index], "%s %s comes before its network %s" % (kind, name, network)
    # all of the fabric before the cluster, the cluster before the pool
    assert kinds[-2:] == ["clusters", "nodePools"]


def test_the_cluster_and_pool_requests_carry_the_gpudirect_settings(rendered):
    out, dummy = rendered
    bodies = [json.loads(p.read_text())["body"] for p in sorted((out / "requests").iterdir())]
    cluster = bodies[-2]["cluster"]
    pool = bodies[-1]["nodePool"]
    assert cluster["networkConfig"]["enableMultiNetworking"] is True
    assert cluster["networkConfig"]["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["ipAllocationPolicy"]["useIpAliases"] is True
    assert pool["config"]["machineType"] == "a3-megagpu-8g"
    assert pool["config"]["gvnic"] == {"enabled": True}
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == GPU_NICS
    networks = [b["name"] for b in bodies if "autoCreateSubnetworks" in b]
    assert all(b["mtu"] == 8244 and b["autoCreateSubnetworks"] is False for b in bodies if "autoCreateSubnetworks" in b)
    assert [c["network"] for c in pool["networkConfig"]["additionalNodeNetworkConfigs"]] == networks


def test_every_manifest_validates(rendered):
    out, dummy = rendered
    count = k8s_validation.validate_path(str(out / "manifests"))
    assert count >= 2 * GPU_NICS + 3  # Network + GKENetworkParamSet per NIC, NRI, installer, test pods


def test_manifests_cover_the_fabric_and_the_gpudirect_software(rendered):
    out, dummy = rendered
    kinds = {}
    for path in (out / "manifests").rglob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        kinds.setdefault(doc["kind"], []).append(doc["metadata"]["name"])
    assert sorted(kinds["Network"]) == ["vpc%d" % i for i in range(1, GPU_NICS + 1)]
    assert len(kinds["GKENetworkParamSet"]) == GPU_NICS
    assert {"device-injector", "nccl-tcpxo-installer"} <= set(kinds["DaemonSet"])
    assert len(kinds["Pod"]) >= 2


def test_the_nccl_environment_is_rendered_three_ways(rendered):
    out, dummy = rendered
    conf = (out / "nccl" / "nccl.conf").read_text()
    exports = (out / "nccl" / "env.sh").read_text()
    env_list = yaml.safe_load((out / "nccl" / "k8s-env.yaml").read_text())
    # the TCPXO guest-config checker aborts a workload without this exact value
    assert "NCCL_NVLSTREE_MAX_CHUNKSIZE=131072" in conf
    assert "export NCCL_NVLSTREE_MAX_CHUNKSIZE=131072" in exports
    assert {"name": "NCCL_NVLSTREE_MAX_CHUNKSIZE", "value": "131072"} in env_list


def test_the_summary_says_what_was_written(rendered):
    out, result = rendered
    # the plan's files: not the marker and host index (hidden), not PLAN.md (written after this summary)
    written = sum(1 for p in out.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts)
                  and p.name != "PLAN.md")
    assert "Rendered %d files" % written in result.stdout
    assert "Nothing was contacted" in result.stdout


def test_the_banners_come_once_each_though_site_imports_gke_gpudirect(rendered):
    """site.yml imports gke_gpudirect.yml: only the outermost playbook prints the render mode banners."""
    out, result = rendered
    banners = [r["result"]["msg"] for r in result.results
               if r["action"].endswith("debug") and "RENDER MODE" in str(r["result"].get("msg", ""))[:20]]
    assert banners == ["RENDER MODE: nothing will be created, changed or deleted; the plan is written to %s" % out,
                       banners[-1]], result.output
    # the last output: the banner, the plan's headline and where its summary is
    assert banners[-1][0].startswith("RENDER MODE: nothing was created, changed or deleted; the plan is ")
    assert banners[-1][1].startswith("PLAN: ") and banners[-1][2] == "PLAN SUMMARY: %s/PLAN.md" % out
    assert banners[-1] == result.results[-1]["result"]["msg"]
