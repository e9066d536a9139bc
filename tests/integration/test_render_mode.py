# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render mode only when asked, and always visible (issue #20 §1).

- the repository's default configuration turns render mode on for no one: a playbook run without
  ``-e gpu_ops_render_dir`` tries to act (here: it fails to log in) and writes no plan;
- a render run's first and last task outputs are the RENDER MODE banner (role render_notice);
- a render writes a complete, fresh plan: twice into one folder gives the files of once, and the rest of a
  half-failed earlier plan goes; a non-empty folder without the marker is refused and left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import (
    REPO_ROOT, RECORDER_DIR, PlaybookResult, ansible_playbook_binary, collections_path)

AKS_MIG = str(REPO_ROOT / "playbooks" / "aks_mig.yml")
MARKER = ".gpu_ops_render"
AKS = {"extra_args": ("-i", str(REPO_ROOT / "inventories" / "aks")),
       "env": {"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"}}


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())


def _no_azure_login_env(tmp_path):
    """No Azure credential anywhere: the environment's AZURE_* cleared, the managed-identity endpoint a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_", "AZURE_", "IDENTITY_", "MSI_"))}
    home = tmp_path / "home"
    home.mkdir()
    env.update(HOME=str(home), AZURE_CONFIG_DIR=str(home / ".azure"), IDENTITY_ENDPOINT="http://127.0.0.1:9/token",
               IDENTITY_HEADER="none", AZURE_SUBSCRIPTION_ID="00000000-0000-0000-0000-000000000000")
    return env


def _run_from_repository_copy(tmp_path, *args):
    """ansible-playbook as a user runs it from the repository root: its ansible.cfg, inventories/ and playbooks/
    (copied, so that whatever the run writes next to them lands in tmp_path), no -i, no ANSIBLE_CONFIG."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO_ROOT / "ansible.cfg", root / "ansible.cfg")
    shutil.copytree(REPO_ROOT / "inventories", root / "inventories")
    shutil.copytree(REPO_ROOT / "playbooks", root / "playbooks")
    results_file = tmp_path / "results.jsonl"
    short_tmp = tempfile.mkdtemp(prefix="gpo-")
    env = _no_azure_login_env(tmp_path)
    env.update(ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_CALLBACK_PLUGINS=str(RECORDER_DIR),
               ANSIBLE_CALLBACKS_ENABLED="gpu_ops_recorder", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_HOME=str(tmp_path / "ansible_home"), GPU_OPS_RESULTS_FILE=str(results_file), TMPDIR=short_tmp)
    command = [ansible_playbook_binary()] + list(args)
    try:
        proc = subprocess.run(command, cwd=str(root), env=env, capture_output=True, text=True, timeout=600, check=False)
    finally:
        shutil.rmtree(short_tmp, ignore_errors=True)
    records = [json.loads(line) for line in results_file.read_text(encoding="utf-8").splitlines() if line] \
        if results_file.exists() else []
    return root, PlaybookResult(command, proc.returncode, proc.stdout, proc.stderr, records)


def _outputs(result):
    """The task results a user reads: every result but the skipped ones, the role argument checks and the includes."""
    return [r for r in result.results if r["status"] != "skipped" and r["action"].rsplit(".", 1)[-1] not in (
        "validate_argument_spec", "include_tasks", "include_role")]


# ------------------------------------------------------------------ (a) not without -e gpu_ops_render_dir

def test_no_inventory_of_the_repository_turns_render_mode_on():
    config = (REPO_ROOT / "ansible.cfg").read_text(encoding="utf-8")
    assert not [line for line in config.splitlines() if line.strip().startswith("inventory")], \
        "ansible.cfg names a default inventory"
    setting = []
    for path in sorted((REPO_ROOT / "inventories").rglob("*.yml")):
        text = path.read_text(encoding="utf-8")
        for document in yaml.safe_load_all(text):
            if "gpu_ops_render_dir" in json.dumps(document):
                setting.append(str(path.relative_to(REPO_ROOT)))
    assert setting == [], "these inventory files set gpu_ops_render_dir: %s" % setting


def test_the_default_configuration_does_not_render_aks_mig(tmp_path):
    """The user's case: `ansible-playbook -i inventories/aks playbooks/aks_mig.yml` from the repository root, no -e."""
    root, result = _run_from_repository_copy(tmp_path, "-i", "inventories/aks", "playbooks/aks_mig.yml")
    assert not (root / "rendered").exists(), "a plan was written without -e gpu_ops_render_dir:\n" + result.output
    assert "RENDER MODE" not in result.stdout, result.output
    pool = result.task("Create the multi-instance GPU node pool")
    # it tried to act: the login fails, nothing is reported as changed
    assert pool["status"] == "failed" and "login failed" in pool["result"]["msg"].lower(), result.output
    assert result.rc != 0 and result.changed == [], result.output


# ------------------------------------------------------------------ (b) the banners

def test_a_render_run_starts_and_ends_with_the_banner(run_playbook, tmp_path):
    render = tmp_path / "plan"
    result = run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(render)}, **AKS).assert_ok()
    outputs = _outputs(result)
    first, last = outputs[0], outputs[-1]
    assert first["action"].endswith("debug") and first["result"]["msg"] == (
        "RENDER MODE: nothing will be created, changed or deleted; the plan is written to %s" % render), result.output
    # the plan's files: not the marker and the host index (hidden), not the summary PLAN.md
    plan = [f for f in _files(render) if not f.startswith(".") and f != "PLAN.md"]
    assert last["action"].endswith("debug") and last["result"]["msg"][0].startswith(
        "RENDER MODE: nothing was created, changed or deleted; the plan is %d files in %s" % (len(plan), render)), \
        result.output
    assert last["result"]["msg"][1:] == ["PLAN: creates 1 cloud resource, applies 1 Kubernetes object in 1 step, installs 1 Helm release, deletes 0",
                                         "PLAN SUMMARY: %s/PLAN.md" % render], result.output
    marker = yaml.safe_load((render / MARKER).read_text(encoding="utf-8"))
    assert marker["playbook"] == "aks_mig.yml" and marker["complete"] is True and marker["written_by"] == "gpu_ops.cluster"


def test_a_live_run_prints_no_banner(run_playbook, tmp_path):
    """Without gpu_ops_render_dir the notice plays skip (here the playbook stops before anything is sent)."""
    result = run_playbook(AKS_MIG, extra_vars={"aks_mig_gpu_instance_profile": "MIG9g"}, env=_no_azure_login_env(tmp_path),
                          extra_args=AKS["extra_args"])
    assert "RENDER MODE" not in result.stdout, result.output
    assert [r for r in result.results if "render_notice" in r["task"] and r["status"] != "skipped"
            and not r["action"].endswith("validate_argument_spec")] == []


# ------------------------------------------------------------------ (c) a fresh plan every run

def test_rendering_twice_gives_the_files_of_once(run_playbook, tmp_path):
    once, twice = tmp_path / "once", tmp_path / "twice"
    run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(once)}, **AKS).assert_ok()
    run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(twice)}, **AKS).assert_ok()
    second = run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(twice)}, **AKS).assert_ok()
    assert _files(twice) == _files(once)
    assert [p.name for p in (twice / "requests").iterdir()] == ["001-arm-put-agentPools_migpool.json"]
    assert "RENDER MODE: removed the earlier plan from %s" % twice in second.stdout, second.output


def test_the_rest_of_a_half_failed_plan_is_replaced(run_playbook, tmp_path):
    fresh, render = tmp_path / "fresh", tmp_path / "render"
    run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(fresh)}, **AKS).assert_ok()
    # an earlier, half-failed run: its marker, requests of another plan, a step this plan does not have
    (render / "requests").mkdir(parents=True)
    for index in range(1, 9):
        (render / "requests" / ("%03d-gcp-post-global_networks.json" % index)).write_text("{}\n", encoding="utf-8")
    (render / "manifests" / "20-gke-gpu-networks").mkdir(parents=True)
    (render / "manifests" / "20-gke-gpu-networks" / "01-network-vpc1.yaml").write_text("{}\n", encoding="utf-8")
    (render / MARKER).write_text("written_by: gpu_ops.cluster\nplaybook: gke_gpudirect.yml\ncomplete: false\n", encoding="utf-8")
    # something of the user's, next to the plan: kept
    (render / "NOTES.md").write_text("mine\n", encoding="utf-8")
    run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(render)}, **AKS).assert_ok()
    assert _files(render) == sorted(_files(fresh) + ["NOTES.md"])
    assert (render / "NOTES.md").read_text(encoding="utf-8") == "mine\n"


# ------------------------------------------------------------------ (d) a folder of someone else's

def test_a_non_empty_folder_without_the_marker_is_refused_and_untouched(run_playbook, tmp_path):
    render = tmp_path / "mine"
    (render / "requests").mkdir(parents=True)
    (render / "requests" / "001-keep.json").write_text("{}\n", encoding="utf-8")
    (render / "notes.txt").write_text("keep me\n", encoding="utf-8")
    before = {path: (render / path).read_text(encoding="utf-8") for path in _files(render)}
    result = run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(render)}, **AKS).assert_failed()
    assert "Refusing to render into %s" % render in result.output
    assert {path: (render / path).read_text(encoding="utf-8") for path in _files(render)} == before
    assert not (render / MARKER).exists()
    # nothing after the refusal ran
    assert result.tasks("Create the multi-instance GPU node pool") == []


def test_a_host_name_that_is_no_file_name_is_refused_before_anything_is_written(run_playbook, tmp_path):
    """Render files are named after inventory hosts: '../escape' would write beside the render folder."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"aks_clusters": {"hosts": {"../escape": {
        "ansible_connection": "local", "aks_mig_resource_group": "gpu-rg", "aks_mig_cluster": "gpu-aks"}}}}}}),
        encoding="utf-8")
    render = tmp_path / "plan" / "render"
    result = run_playbook(AKS_MIG, extra_vars={"gpu_ops_render_dir": str(render)}, env=AKS["env"],
                          extra_args=("-i", str(inventory))).assert_failed()
    assert 'these names cannot be file names in the render folder: "../escape"' in result.output, result.output
    assert not (tmp_path / "plan").exists()
    assert result.tasks("Create the multi-instance GPU node pool") == []
