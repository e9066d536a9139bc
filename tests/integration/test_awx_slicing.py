# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A sliced host validation for a 1,000-host fleet: playbooks/awx_setup.yml against the AWX double (eight execution
nodes and a container group), then the workflow's first and last nodes as AWX would run them - the limit preflight
(playbooks/awx_slice_preflight.yml) on the 1,000-host inventory with the extra variables the double stored, and the
merged report (playbooks/validate_merge.yml) of the 1,000 per-host reports the slices wrote and published."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.slicing import slices
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import report
from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, collections_path
from ansible_collections.gpu_ops.cluster.tests.integration.test_playbook_awx_setup import project_files

HOSTS = ["gpu-%04d" % i for i in range(1000)]
GROUPS = [{"name": "default", "instances": [{"hostname": "exec-%d" % i, "node_type": "execution", "capacity": 136}
                                            for i in range(8)]
           + [{"hostname": "control-1", "node_type": "control", "capacity": 136}]},
          {"name": "gpu-pods", "is_container_group": True, "max_concurrent_jobs": 4}]
TEMPLATE = {"name": "Validate GPU hosts", "playbook": "playbooks/validate.yml", "inventory": "GPU fleet",
            "description": "Read-only checks of every GPU host", "slice": True, "merge_reports": True, "forks": 25,
            "extra_vars": {"validate_output_dir": "/runner/shared/validate-reports"}}

pytestmark = pytest.mark.skipif(
    not any((pathlib.Path(p) / "ansible_collections/awx/awx/MANIFEST.json").is_file()
            for p in collections_path().split(":")),
    reason="awx.awx is not installed next to this collection (scripts/bootstrap.sh installs it)")


@pytest.fixture(scope="module")
def setup(run_playbook_module, tmp_path_factory):
    """The double after awx_setup.yml created the sliced template, its preflight and merge templates and the workflow."""
    awx = AwxDouble(project_files=project_files(), instance_groups=GROUPS).start()
    try:
        run_playbook_module(REPO_ROOT / "playbooks/awx_setup.yml", extra_vars={
            "awx_setup_controller": {"controller_host": awx.url, "controller_oauthtoken": awx.token},
            "awx_job_templates_project_scm_url": "https://git.example/gpu_ops/cluster.git",
            "awx_job_templates_instance_groups": ["default", "gpu-pods"],
            "awx_job_templates_templates": [TEMPLATE]}).assert_ok()
        yield awx
    finally:
        awx.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    inventory = tmp_path_factory.mktemp("fleet") / "hosts.json"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_hosts": {"hosts": {h: {} for h in HOSTS}}}}}), encoding="utf-8")
    return inventory


def stored_extra_vars(awx, name):
    return json.loads(awx.find("job_templates", name)["extra_vars"])


def test_the_sliced_template_and_its_workflow(setup):
    awx = setup
    sliced = awx.find("job_templates", "Validate GPU hosts")
    # forks 25: impact 26; eight execution nodes of capacity 136 (the control node runs no job) + the container group's 4
    assert (sliced["job_slice_count"], sliced["forks"]) == (12, 25)
    assert awx.associated_names("job_templates", sliced["id"], "instance_groups") == ["default", "gpu-pods"]
    assert stored_extra_vars(awx, "Validate GPU hosts") == {
        "validate_output_dir": "/runner/shared/validate-reports", "validate_scope": "hosts"}
    preflight = awx.find("job_templates", "Validate GPU hosts - limit preflight")
    assert preflight["playbook"] == "playbooks/awx_slice_preflight.yml" and preflight["ask_limit_on_launch"] is True
    assert stored_extra_vars(awx, preflight["name"]) == {
        "validate_output_dir": "/runner/shared/validate-reports", "awx_job_templates_slice_count": 12,
        "awx_job_templates_slice_template": "Validate GPU hosts", "awx_job_templates_slice_playbook": "playbooks/validate.yml"}
    merged = awx.find("job_templates", "Validate GPU hosts - merged report")
    # the launch limit names GPU hosts: the merge on localhost must not take it
    assert (merged["playbook"], merged["ask_limit_on_launch"]) == ("playbooks/validate_merge.yml", False)
    assert stored_extra_vars(awx, merged["name"]) == {"validate_output_dir": "/runner/shared/validate-reports"}
    workflow = awx.find("workflow_job_templates", "Validate GPU hosts - workflow")
    assert workflow["ask_limit_on_launch"] is True
    nodes = {n["identifier"]: n for n in awx.objects("workflow_job_template_nodes") if n["workflow_job_template"] == workflow["id"]}
    assert {k: n["unified_job_template"] for k, n in nodes.items()} == {
        "limit-preflight": preflight["id"], "slices": sliced["id"], "merged-report": merged["id"]}
    links = {(k, sub): awx.associated_names("workflow_job_template_nodes", n["id"], sub)
             for k, n in nodes.items() for sub in ("success_nodes", "failure_nodes", "always_nodes")}
    assert {key: value for key, value in links.items() if value} == {
        ("limit-preflight", "success_nodes"): ["slices"], ("slices", "always_nodes"): ["merged-report"]}


def test_the_limit_preflight_on_a_thousand_hosts(setup, fleet, run_playbook):
    """The runner's own inventory adds localhost (it sorts after the gpu-* hosts): 1,001 hosts in all."""
    extra = stored_extra_vars(setup, "Validate GPU hosts - limit preflight")
    playbook = REPO_ROOT / "playbooks/awx_slice_preflight.yml"
    check = "gpu_ops.cluster.awx_job_templates : Refuse a limit that leaves a slice without a host"

    def run(*limit):
        return run_playbook(playbook, extra_vars=extra, extra_args=["-i", str(fleet)] + (["--limit", limit[0]] if limit else []))

    whole = run().assert_ok()
    assert whole.task(check)["result"]["msg"] == "each of the 12 slices of Validate GPU hosts keeps a host (1001 of 1001 hosts)"
    # the first twelve hosts in name order: one in each slice
    spread = run("gpu-000*:gpu-0010:gpu-0011").assert_ok()
    assert spread.task(check)["result"]["msg"].endswith("(12 of 1001 hosts)")
    narrow = run("gpu-000*")
    narrow.assert_failed()
    assert narrow.failed[0]["result"]["msg"] == (
        "Validate GPU hosts: the limit keeps 10 of 1001 hosts and leaves 2 of the 12 slices without a host "
        "(slice 11, 12): AWX fails such a slice and with it the whole job. Launch without a limit, with a limit "
        "that keeps a host in every slice (at least 12 hosts spread over the inventory), or run the template's "
        "unsliced playbook for a few hosts. No slice was started.")


def test_the_merged_report_of_a_thousand_hosts(setup, run_playbook, tmp_path):
    extra = stored_extra_vars(setup, "Validate GPU hosts - merged report")
    out = tmp_path / "shared" / "validate-reports"
    published = {}
    # what each slice did: one report per host in the shared folder, the counts under its own key (AWX job ids 101..)
    for number, part in enumerate(slices(HOSTS, 12)):
        published["validate_slice_%d" % (101 + number)] = counts = {}
        for host in part:
            results = [dict(id="host.driver", status="failed" if host == "gpu-0500" else "passed", phase="deployment",
                            title="Driver", reads=["nvidia-smi"], evidence=[], message="driver 570", cause="an old driver.",
                            fix="upgrade."),
                       dict(id="host.mig", status="skipped", phase="deployment", title="MIG", reads=[], evidence=[],
                            message="no MIG asked")]
            if host == "gpu-0999":  # its slice ran, but its report never reached the shared folder
                counts[host] = {"tests": 2, "passed": 1, "failed": 0, "skipped": 1, "other": 0}
                continue
            (out / host).mkdir(parents=True)
            (out / host / "ctrf.json").write_text(json.dumps(report.ctrf(results, host, 1000, 2000)), encoding="utf-8")
            counts[host] = {"tests": 2, "passed": 1 if host != "gpu-0500" else 0, "failed": int(host == "gpu-0500"),
                            "skipped": 1, "other": 0}
    result = run_playbook(REPO_ROOT / "playbooks/validate_merge.yml",
                          extra_vars=dict(extra, validate_output_dir=str(out), **published))
    result.assert_failed()
    assert result.failed[0]["result"]["msg"].startswith("1999 checks: 998 passed, 1 failed, 999 skipped, 1 other")
    merged = json.loads((out / "merged" / "ctrf.json").read_text(encoding="utf-8"))
    summary = merged["results"]["summary"]
    assert (summary["tests"], summary["passed"], summary["failed"], summary["skipped"], summary["other"]) == (1999, 998, 1, 999, 1)
    assert len(merged["results"]["environment"]["extra"]["targets"]) == 1000
    page = (out / "merged" / "report.md").read_text(encoding="utf-8")
    assert "998 of 1000 targets ok." in page
    assert "| OTHER | gpu-0999 | `report` | no CTRF report of gpu-0999" in page
    assert "| FAILED | gpu-0500 | `host.driver` |" in page
    junit = (out / "merged" / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("<testsuite ") == 1000 and 'failures="1" errors="1" skipped="999"' in junit
