# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/awx_setup.yml with the real awx.awx modules against the AWX API double (tests/doubles/awx.py).

A setup run and its re-run (each ~15 awx.awx module runs) make one test; the failure cases run one small
playbook each against a double of their own.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_survey import awx_survey_spec
from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, collections_path

PLAYBOOK = REPO_ROOT / "playbooks" / "awx_setup.yml"
SECRETS = {"gcp_key": "-----BEGIN PRIVATE KEY-----\nMIIdoubleKEY\n-----END PRIVATE KEY-----\n",
           "azure_secret": "azure-client-s3cret-9d1", "k8s_token": "k8s-bearer-t0ken-44a"}
CREDENTIALS = [
    {"name": "GCP service account", "type": "gcp",
     "inputs": {"username": "gpu-ops@my-gpu-project.iam.gserviceaccount.com", "project": "my-gpu-project",
                "ssh_key_data": SECRETS["gcp_key"]}},
    {"name": "Azure service principal", "type": "azure",
     "inputs": {"subscription": "00000000-0000-0000-0000-000000000001", "client": "app-id", "tenant": "tenant-id",
                "secret": SECRETS["azure_secret"]}},
    {"name": "AKS API", "type": "kubernetes",
     "inputs": {"host": "https://gpu-aks.hcp.example:443", "bearer_token": SECRETS["k8s_token"]}},
]


def project_files():
    """What AWX finds in the project: the playbooks and the inventory folders."""
    playbooks = [str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "playbooks").glob("*.yml")]
    return playbooks + [str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "inventories").iterdir() if p.is_dir()]


pytestmark = pytest.mark.skipif(
    not any((pathlib.Path(p) / "ansible_collections/awx/awx/MANIFEST.json").is_file()
            for p in collections_path().split(":")),
    reason="awx.awx is not installed next to this collection (scripts/bootstrap.sh installs it)")


@pytest.fixture
def awx():
    double = AwxDouble(project_files=project_files()).start()
    try:
        yield double
    finally:
        double.stop()


def setup_vars(awx, **extra):
    return dict({"awx_setup_controller": {"controller_host": awx.url, "controller_oauthtoken": awx.token},
                 "awx_job_templates_project_scm_url": "https://git.example/gpu_ops/cluster.git",
                 "awx_job_templates_credentials": CREDENTIALS}, **extra)


def test_setup_then_rerun_changes_nothing(awx, run_playbook):
    """One test for both runs: each costs ~15 awx.awx module runs, and xdist would repeat a shared fixture per worker."""
    first = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx)).assert_ok()
    assert first.task("Job templates")["changed"]
    assert_created(awx)
    before = len(awx.mutating_requests())
    second = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx)).assert_ok()
    assert second.changed == [] and second.stats["localhost"]["changed"] == 0
    assert awx.mutating_requests()[before:] == []
    for run in (first, second):
        for secret in SECRETS.values():
            assert secret.splitlines()[1 if "\n" in secret else 0] not in run.stdout + run.stderr


def assert_created(awx):
    project = awx.find("projects", "gpu_ops.cluster")
    org = awx.find("organizations", "gpu_ops")
    assert (project["organization"], project["scm_type"], project["scm_url"]) == (
        org["id"], "git", "https://git.example/gpu_ops/cluster.git")
    source = awx.find("inventory_sources", "GPU fleet from inventories/fleet")
    assert (source["source"], source["source_path"], source["source_project"]) == ("scm", "inventories/fleet", project["id"])
    defaults = yaml.safe_load((REPO_ROOT / "roles/awx_job_templates/defaults/main.yml").read_text(encoding="utf-8"))
    expected = {t["name"]: t for t in defaults["awx_job_templates_templates"]}
    templates = {t["name"]: t for t in awx.objects("job_templates")}
    sliced = [name for name, t in expected.items() if t.get("slice")]
    # each sliced template comes with its limit preflight, the validation also with its merged report
    companions = {n + " - limit preflight" for n in sliced} | {n + " - merged report" for n, t in expected.items() if t.get("merge_reports")}
    assert set(templates) == set(expected) | companions
    role_specs = {role: yaml.safe_load((REPO_ROOT / "roles" / role / "meta/argument_specs.yml").read_text(encoding="utf-8"))
                  for role in {s["role"] for t in expected.values() for s in t.get("survey", [])}}
    for name in sliced:
        # the double is a one-node AWX (a hybrid node of capacity 59 in default): one slice
        assert (templates[name]["job_slice_count"], awx.associated_names("job_templates", templates[name]["id"], "instance_groups")) == (
            1, ["default"])
        workflow = awx.find("workflow_job_templates", name + " - workflow")
        assert workflow["ask_limit_on_launch"] is True
    assert json.loads(templates["Validate GPU hosts"]["extra_vars"]) == {"validate_scope": "hosts"}
    for name, template in templates.items():
        if name in companions:
            continue
        expected[name].setdefault("survey", [])
        assert template["playbook"] == expected[name]["playbook"]
        assert template["project"] == project["id"] and template["ask_limit_on_launch"]
        assert template["survey_enabled"] is (len(expected[name]["survey"]) > 0)
        # the stored survey is the one generated from the roles' argument specs
        assert awx.survey(template["id"]) == awx_survey_spec(expected[name]["survey"], name, expected[name]["description"],
                                                             role_specs=role_specs)
        # a launch where nobody answers adds no variable but the template's own: each cluster keeps its inventory values
        own = json.loads(template["extra_vars"]) if template["extra_vars"] else {}
        assert awx.launch_extra_vars(template["id"]) == own, name
        asked = {q["variable"] for q in awx.survey(template["id"]).get("spec", [])}
        assert awx.launch_extra_vars(template["id"], {v: "answer" for v in asked}) == dict(own, **{v: "answer" for v in asked})
    assert awx.credentials_of(templates["GKE GPUDirect"]["id"]) == ["GCP service account"]
    assert awx.credentials_of(templates["AKS MIG"]["id"]) == ["Azure service principal", "AKS API"]
    gcp = awx.find("credentials", "GCP service account")
    assert gcp["inputs"]["ssh_key_data"] == "$encrypted$" and gcp["kind"] == "gce"


def seed(awx):
    """The organization, project, inventory and a GCP credential, created through the double's API."""
    def post(collection, body):
        status, document = awx.handle("POST", "/api/v2/%s/" % collection, {"Authorization": "Bearer " + awx.token},
                                      json.dumps(body).encode("utf-8"))
        assert status == 201, document
        return document["id"]

    org = post("organizations", {"name": "seeded"})
    post("projects", {"name": "gpu_ops.cluster", "organization": org, "scm_type": "git", "scm_url": "https://git.example/c.git"})
    post("inventories", {"name": "GPU fleet", "organization": org})
    gce = awx.find("credential_types", "Google Compute Engine")["id"]
    post("credentials", {"name": "GCP service account", "organization": org, "credential_type": gce,
                         "inputs": {"username": "sa@p.iam.gserviceaccount.com", "ssh_key_data": "KEY"}})


def test_awx_rejections_fail_the_task_with_its_message(awx, run_playbook):
    seed(awx)
    bad_survey = {"name": "bad", "description": "", "spec": [
        {"question_name": "Fabric", "variable": "fabric", "type": "multiplechoice", "required": False,
         "choices": ["tcpx", "tcpxo"], "default": "rdma"}]}
    common = {"organization": "seeded", "project": "gpu_ops.cluster", "playbook": "playbooks/gke_gpudirect.yml"}
    play = [{"hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/awx.awx.controller": {"controller_host": awx.url, "controller_oauthtoken": awx.token}},
             "tasks": [
                 {"name": "Survey AWX rejects", "ignore_errors": True,
                  "awx.awx.job_template": dict(common, name="bad survey", inventory="GPU fleet", survey_enabled=True,
                                               survey_spec=bad_survey)},
                 {"name": "Unknown inventory", "ignore_errors": True,
                  "awx.awx.job_template": dict(common, name="unknown inventory", inventory="No such inventory")},
                 {"name": "Unknown named credential", "ignore_errors": True,
                  "awx.awx.job_template": dict(common, name="unknown credential", inventory="GPU fleet",
                                               credentials=["GCP++Google Compute Engine+cloud++seeded"])},
                 {"name": "Named credential", "awx.awx.job_template": dict(
                     common, name="named credential", inventory="GPU fleet",
                     credentials=["GCP service account++Google Compute Engine+cloud++seeded"])},
             ]}]
    result = run_playbook(play)
    survey = result.task("Survey AWX rejects")
    assert survey["status"] == "ignored"
    assert survey["result"]["msg"] == "Failed to update survey: Default choice must be answered from the choices listed."
    unknown = result.task("Unknown inventory")
    assert unknown["status"] == "ignored"
    assert unknown["result"]["msg"] == "Request to /api/v2/inventories/?name=No+such+inventory returned 0 items, expected 1"
    named = result.task("Unknown named credential")
    assert named["status"] == "ignored" and "could not be found" in named["result"]["msg"]
    assert result.task("Named credential")["status"] == "ok"
    bound = awx.credentials_of(awx.find("job_templates", "named credential")["id"])
    assert bound == ["GCP service account"]


def test_a_bad_template_list_fails_before_any_change(awx, run_playbook):
    before = len(awx.mutating_requests())
    templates = [{"name": "Broken", "playbook": "playbooks/gke_gpudirect.yml", "inventory": "GPU fleet",
                  "survey": [{"role": "gke_gpu_cluster", "options": ["gke_gpu_cluster_recreate"]}]}]
    result = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx, awx_job_templates_templates=templates))
    result.assert_failed()
    failed = result.failed[0]
    assert failed["task"].endswith("Generate the surveys from the roles' argument specs")
    messages = [item.get("msg", "") for item in failed["result"]["results"]]
    assert any("gke_gpu_cluster_recreate cannot be a survey question: bool" in msg for msg in messages), messages
    assert len(awx.mutating_requests()) == before


def test_render_plans_every_object_and_contacts_no_controller(awx, run_playbook, tmp_path):
    """-e gpu_ops_render_dir: one file per AWX object under awx/, credential inputs masked, the double untouched."""
    render = tmp_path / "plan"
    result = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx, gpu_ops_render_dir=str(render))).assert_ok()
    assert awx.mutating_requests() == []
    files = sorted(p.name for p in (render / "awx").iterdir())
    assert files == ["10-organization.yaml", "20-project.yaml", "30-credential-01-gcp-service-account.yaml",
                     "30-credential-02-azure-service-principal.yaml", "30-credential-03-aks-api.yaml",
                     "40-inventory-01-gpu-fleet.yaml", "50-job_template-01-gke-gpudirect.yaml",
                     "50-job_template-02-gke-gpudirect-teardown.yaml", "50-job_template-03-aks-mig.yaml",
                     "50-job_template-04-gpu-hosts.yaml", "50-job_template-05-gpu-operator.yaml",
                     "50-job_template-06-validate.yaml", "50-job_template-07-validate-gpu-hosts.yaml",
                     "60-workflow_job_template-01-gpu-hosts---workflow.yaml",
                     "60-workflow_job_template-02-validate-gpu-hosts---workflow.yaml"]
    everything = "".join(p.read_text(encoding="utf-8") for p in (render / "awx").iterdir()) + result.stdout + result.stderr
    for secret in SECRETS.values():
        assert secret.splitlines()[1 if "\n" in secret else 0] not in everything
    azure = yaml.safe_load((render / "awx/30-credential-02-azure-service-principal.yaml").read_text(encoding="utf-8"))
    assert azure["credential_type"] == "Microsoft Azure Resource Manager"
    assert azure["inputs"] == {key: "********" for key in ("subscription", "client", "tenant", "secret")}
    source = yaml.safe_load((render / "awx/40-inventory-01-gpu-fleet.yaml").read_text(encoding="utf-8"))
    assert [o["module"] for o in source] == ["awx.awx.inventory", "awx.awx.inventory_source"]
    assert source[1]["source_path"] == "inventories/fleet"
    defaults = yaml.safe_load((REPO_ROOT / "roles/awx_job_templates/defaults/main.yml").read_text(encoding="utf-8"))
    expected = {t["name"]: t for t in defaults["awx_job_templates_templates"]}
    aks = yaml.safe_load((render / "awx/50-job_template-03-aks-mig.yaml").read_text(encoding="utf-8"))
    assert aks["playbook"] == "playbooks/aks_mig.yml" and aks["credentials"] == ["Azure service principal", "AKS API"]
    role_specs = {"nvidia_device_plugin": yaml.safe_load(
        (REPO_ROOT / "roles/nvidia_device_plugin/meta/argument_specs.yml").read_text(encoding="utf-8"))}
    assert aks["survey_spec"] == awx_survey_spec(expected["AKS MIG"]["survey"], "AKS MIG", expected["AKS MIG"]["description"],
                                                 role_specs=role_specs)
    assert aks["ask_limit_on_launch"] is True and aks["survey_enabled"] is True
    # a sliced template: sized from the instance groups when applied; its workflow's preflight, slices and merged report
    hosts = yaml.safe_load((render / "awx/50-job_template-07-validate-gpu-hosts.yaml").read_text(encoding="utf-8"))
    assert hosts["job_slice_count"] == "capacity of default at apply, at most 32" and hosts["instance_groups"] == ["default"]
    assert hosts["extra_vars"] == {"validate_scope": "hosts"}
    flow = yaml.safe_load((render / "awx/60-workflow_job_template-02-validate-gpu-hosts---workflow.yaml").read_text(encoding="utf-8"))
    assert [o["name"] for o in flow] == ["Validate GPU hosts - limit preflight", "Validate GPU hosts - merged report",
                                         "Validate GPU hosts - workflow"]
    assert [n["identifier"] for n in flow[2]["workflow_nodes"]] == ["limit-preflight", "slices", "merged-report"]
    assert "RENDER MODE: nothing will be created" in result.stdout


def test_renaming_the_organization_is_refused_before_any_change_then_converges(awx, run_playbook):
    """A setup, then the same vars with another organization name: refused before the first write, naming the
    variable, what AWX holds and how to proceed; the old name re-runs with no change, and after the organization is
    renamed in AWX (as the message says) the new name does too."""
    run_playbook(PLAYBOOK, extra_vars=setup_vars(awx)).assert_ok()
    counts = {c: len(awx.objects(c)) for c in ("organizations", "projects", "inventories", "credentials", "job_templates")}
    before = len(awx.mutating_requests())
    renamed = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx, awx_job_templates_organization="gpu_ops_platform"))
    renamed.assert_failed()
    assert awx.mutating_requests()[before:] == []
    assert {c: len(awx.objects(c)) for c in counts} == counts
    message = renamed.failed[0]["result"]["msg"]
    assert renamed.failed[0]["task"].endswith("Refuse a setup that AWX holds under another organization")
    for part in ("awx_job_templates_organization: gpu_ops_platform is not an organization in AWX",
                 "project gpu_ops.cluster", "inventory GPU fleet", "in organization gpu_ops",
                 "new_name: gpu_ops_platform", "awx_job_templates_organization: gpu_ops",
                 "Nothing was created or changed in AWX"):
        assert part in message, (part, message)
    assert "returned 2 items" not in renamed.stdout
    # the old name converges with no change
    same = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx)).assert_ok()
    assert same.stats["localhost"]["changed"] == 0 and awx.mutating_requests()[before:] == []
    # renamed in AWX as the message says: the new name converges with no change, nothing new created
    org = awx.find("organizations", "gpu_ops")
    status, _document = awx.handle("PATCH", "/api/v2/organizations/%d/" % org["id"], {"Authorization": "Bearer " + awx.token},
                                   json.dumps({"name": "gpu_ops_platform"}).encode("utf-8"))
    assert status == 200
    after_rename = len(awx.mutating_requests())
    moved = run_playbook(PLAYBOOK, extra_vars=setup_vars(awx, awx_job_templates_organization="gpu_ops_platform")).assert_ok()
    assert moved.stats["localhost"]["changed"] == 0 and awx.mutating_requests()[after_rename:] == []
    assert {c: len(awx.objects(c)) for c in counts} == counts
