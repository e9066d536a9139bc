# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan summary of a render run (issue #20 §4): PLAN.md at the top of the render folder, per run and per
host, and its headline in the play output next to the RENDER MODE banner (role render_notice, finish).

The counts are checked against the files the run wrote, read here independently of the summary's engine.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import render_playbook

SUMMARY = "PLAN.md"


def _plan_files(out):
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts)
                  and p.name != SUMMARY)


def _last_output(result):
    shown = [r for r in result.results if r["status"] != "skipped" and r["action"].endswith("debug")]
    return shown[-1]["result"]["msg"]


def _index(out, host):
    return [line for line in (out / ".gpu_ops_render_hosts" / ("%s.txt" % host)).read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`make demo`: site.yml with inventories/local in render mode."""
    return render_playbook(tmp_path_factory, "site.yml", "local", "plan-demo")


@pytest.fixture(scope="module")
def gpu_hosts(tmp_path_factory):
    return render_playbook(tmp_path_factory, "gpu_hosts.yml", "baremetal", "plan-gpu-hosts")


@pytest.fixture(scope="module")
def teardown(tmp_path_factory):
    return render_playbook(tmp_path_factory, "gke_gpudirect_teardown.yml", "gke", "plan-teardown")


def test_the_demo_writes_plan_md_whose_headline_counts_the_files(demo):
    out, result = demo
    files = _plan_files(out)
    requests = [json.loads((out / f).read_text(encoding="utf-8")) for f in files if f.startswith("requests/")]
    manifests = [f for f in files if f.startswith("manifests/")]
    steps = {f.split("/")[1] for f in manifests}
    assert requests and manifests
    assert {r["method"] for r in requests} == {"POST"}
    headline = "creates %d cloud resources, applies %d Kubernetes objects in %d steps, deletes 0" % (
        len(requests), len(manifests), len(steps))
    assert headline == "creates 26 cloud resources, applies 23 Kubernetes objects in 4 steps, deletes 0"
    text = (out / SUMMARY).read_text(encoding="utf-8")
    assert "This run %s." % headline in text
    assert "%d files in `%s`" % (len(files), out) in text
    assert "\n## a3mega-demo\n" in text
    for name in ("`a3mega-demo`", "`a3mega-pool`", "`20-gke-gpu-networks` | apply | 8 GKENetworkParamSet, 8 Network",
                 "DaemonSet/nccl-tcpxo-installer (ns kube-system)", "`nccl/nccl.conf`"):
        assert name in text, name
    # short for a person: a fraction of the 52 files it sums up
    assert len(text.splitlines()) < 40


def test_the_demo_ends_with_the_banner_and_the_headline(demo):
    out, result = demo
    files = _plan_files(out)
    assert _last_output(result) == [
        "RENDER MODE: nothing was created, changed or deleted; the plan is %d files in %s "
        "(review it, then run again without gpu_ops_render_dir to apply it)" % (len(files), out),
        "PLAN: creates 26 cloud resources, applies 23 Kubernetes objects in 4 steps, deletes 0",
        "PLAN SUMMARY: %s/%s" % (out, SUMMARY)]


def test_the_writers_name_the_host_of_every_request_and_object(demo):
    out, dummy = demo
    files = _plan_files(out)
    owned = _index(out, "a3mega-demo")
    assert sorted(owned) == [f for f in files if f.startswith(("requests/", "manifests/"))]


def test_the_gpu_hosts_render_has_a_mig_table_per_host(gpu_hosts):
    out, result = gpu_hosts
    text = (out / SUMMARY).read_text(encoding="utf-8")
    sections = dict((s.split("\n", 1)[0], s) for s in text.split("\n## ")[1:])
    assert sorted(sections) == ["dgx-a100-01", "hgx-h100-01", "hgx-h200-01"]
    created = 0
    for host, section in sections.items():
        plan = json.loads((out / "checks" / "gpu_hosts" / host / "mig-plan.json").read_text(encoding="utf-8"))
        rows = re.findall(r"^\| (\d+)(?:-(\d+))? \| ([^|]+) \| (on|off) \| ([^|]+) \|", section, re.M)
        covered = [i for first, last, *dummy in rows for i in range(int(first), int(last or first) + 1)]
        assert covered == [g["index"] for g in plan["gpus"]], host
        created += len([c for c in plan["changes"] if c["action"] == "create" and c["kind"] == "gpu_instance"])
    assert "| 0-6 | H100-80GB | on | 1× 2g.20gb, 2× 1g.10gb, 1× 3g.40gb | create 4 GPU instances, update MIG mode |" \
        in sections["hgx-h100-01"]
    assert "| 7 | H100-80GB | on | 1× 4g.40gb, 1× 3g.40gb (3 compute instances) |" in sections["hgx-h100-01"]
    assert "| 4-7 | A100-40GB | off | - | none |" in sections["dgx-a100-01"]
    assert "active threads 50%; pinned memory 4=16G,5=16G" in sections["dgx-a100-01"]
    assert "MPS" not in sections["hgx-h200-01"]
    assert _last_output(result)[1] == "PLAN: creates %d MIG instances on 12 GPUs of 2 hosts, configures MPS on 1 host, deletes 0" \
        % created


def test_the_teardown_render_shows_deletions_as_deletions(teardown):
    out, result = teardown
    deleted = [f for f in _plan_files(out) if re.search(r"/\d+-delete-", f)]
    targets = [f for f in _plan_files(out) if f.startswith("checks/teardown/")]
    assert len(deleted) == 16 and sorted(deleted + targets) == sorted(_plan_files(out))
    # the cloud part cannot be planned without read access: said plainly, with the names a teardown looks for
    assert len(targets) == 1
    host = targets[0].split("/")[-1][:-len(".yml")]
    said = yaml.safe_load((out / targets[0]).read_text(encoding="utf-8"))
    assert said["read_access_needed"].startswith("render mode reads no cloud project, so this plan cannot show which")
    order = said["delete_if_present_in_order"]
    assert [line.split(" ")[0] for line in order] == ["node", "cluster", "firewall", "subnetworks", "networks"]
    assert order[4].count(", ") == 7, "the 8 GPU NIC networks of TCPXO"
    assert targets[0] in _index(out, host)
    shown = [r["result"]["msg"] for r in result.results if r["action"].endswith("debug") and r["status"] != "skipped"
             and "RENDER MODE: no cloud deletion is in this plan" in str(r["result"].get("msg"))]
    assert len(shown) == 1 and "Where they exist, the teardown deletes, in this order: node pool " in shown[0]
    text = (out / SUMMARY).read_text(encoding="utf-8")
    assert "This run deletes 16 (16 Kubernetes objects)." in text
    assert "| `20-gke-gpu-networks` | delete | 8 Network, 8 GKENetworkParamSet |" in text
    assert "| apply |" not in text
    assert _last_output(result)[1] == "PLAN: deletes 16 (16 Kubernetes objects)"
    for path in deleted:
        assert yaml.safe_load((out / path).read_text(encoding="utf-8"))["kind"] in ("Network", "GKENetworkParamSet")
