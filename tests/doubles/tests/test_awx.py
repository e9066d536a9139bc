# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX API double enforces what AWX enforces (over HTTP, in process).

The awx.awx flows through ansible-playbook are covered by tests/integration/test_playbook_awx_setup.py.
"""

from __future__ import annotations

import pytest
import requests

from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble

QUESTION = {"question_name": "Nodes", "variable": "nodes", "type": "integer", "required": False, "default": 2}


@pytest.fixture(scope="module")
def awx():
    double = AwxDouble(project_files=["playbooks/site.yml", "inventories/fleet"], page_size=2).start()
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture(scope="module")
def api(awx):
    session = requests.Session()
    session.headers["Authorization"] = "Bearer %s" % awx.token

    def call(method, path, body=None, **params):
        response = session.request(method, awx.url + "/api/v2/" + path, json=body, params=params or None)
        return response.status_code, (response.json() if response.content else None)

    return call


@pytest.fixture(scope="module")
def template(api):
    status, org = api("POST", "organizations/", {"name": "gpu"})
    assert status == 201, org
    status, project = api("POST", "projects/", {"name": "p", "organization": org["id"], "scm_type": "git",
                                                "scm_url": "https://git.example/p.git"})
    assert status == 201, project
    status, inventory = api("POST", "inventories/", {"name": "fleet", "organization": org["id"]})
    assert status == 201, inventory
    status, jt = api("POST", "job_templates/", {"name": "jt", "project": project["id"], "inventory": inventory["id"],
                                                "playbook": "playbooks/site.yml"})
    assert status == 201, jt
    return jt


def spec_with(**changes):
    question = dict(QUESTION, **changes)
    for key in [k for k, v in changes.items() if v is KeyError]:
        del question[key]
    return {"name": "s", "description": "", "spec": [question]}


@pytest.mark.parametrize("spec, error", [
    ({"description": "", "spec": [QUESTION]}, "Field 'name' is missing from survey spec."),
    ({"name": "s", "description": "", "spec": {}}, "Expected list of items for field 'spec', received dict type."),
    ({"name": "s", "description": "", "spec": []}, "'spec' doesn't contain any items."),
    ({"name": "s", "description": "", "spec": ["q"]}, "Survey question 0 is not a json object."),
    (spec_with(variable=KeyError), "'variable' missing from survey question 0"),
    (spec_with(required="yes"), "'required' in survey question 0 expected to be boolean."),
    ({"name": "s", "description": "", "spec": [QUESTION, QUESTION]}, "'variable' 'nodes' duplicated in survey question 1."),
    (spec_with(type="boolean"), "'boolean' in survey question 0 is not one of 'text, textarea, password, multiplechoice, "
                                "multiselect, integer, float' allowed question types."),
    (spec_with(default="2"), "Default value 2 in survey question 0 expected to be integer."),
    (spec_with(type="text", default=2), "Default value 2 in survey question 0 expected to be string."),
    (spec_with(min="1"), "The min limit in survey question 0 expected to be integer."),
    (spec_with(type="multiplechoice", default="a"), "Survey question 0 of type multiplechoice must specify choices."),
    (spec_with(type="multiplechoice", choices=["a", "b"], default="c"), "Default choice must be answered from the choices listed."),
    (spec_with(type="multiplechoice", choices=["a", "b"], default="a\nb"),
     "Multiple Choice (Single Select) can only have one default value."),
    (spec_with(type="text", default="$encrypted$"),
     "$encrypted$ is a reserved keyword for password question defaults, survey question 0 is type text."),
    (spec_with(type="password", default="$encrypted$"),
     "$encrypted$ is a reserved keyword, may not be used for new default in position 0."),
])
def test_survey_specs_awx_rejects_are_rejected_with_its_message(api, template, spec, error):
    status, answer = api("POST", "job_templates/%d/survey_spec/" % template["id"], spec)
    assert (status, answer) == (400, {"error": error})


def test_accepted_survey_reads_back_normalised_and_passwords_hidden(api, template):
    spec = {"name": "s", "description": "d", "spec": [
        dict(QUESTION, type="float", default=2),  # AWX takes an integer default for a float question
        {"question_name": "Fabric", "variable": "fabric", "type": "multiplechoice", "required": True,
         "choices": "tcpx\n\ntcpxo\n", "default": "tcpxo"},
        {"question_name": "Token", "variable": "token", "type": "password", "required": False, "default": "s3cret"}]}
    assert api("POST", "job_templates/%d/survey_spec/" % template["id"], spec) == (200, None)
    status, stored = api("GET", "job_templates/%d/survey_spec/" % template["id"])
    assert status == 200
    assert stored["spec"][1]["choices"] == "tcpx\ntcpxo"
    assert stored["spec"][2]["default"] == "$encrypted$"
    # sending $encrypted$ back keeps the stored password
    assert api("POST", "job_templates/%d/survey_spec/" % template["id"], stored) == (200, None)
    assert api("DELETE", "job_templates/%d/survey_spec/" % template["id"]) == (200, None)
    assert api("GET", "job_templates/%d/survey_spec/" % template["id"]) == (200, {})


def test_names_resolve_to_ids_as_awx_does(api, template):
    status, found = api("GET", "job_templates/", name="jt", organization=template["organization"])
    assert status == 200 and found["count"] == 1 and found["results"][0]["id"] == template["id"]
    assert api("GET", "job_templates/", name="nope")[1]["count"] == 0
    # name_or_id lookups: or__id / or__name
    assert api("GET", "job_templates/", or__id=str(template["id"]), or__name=str(template["id"]))[1]["count"] == 1
    assert api("GET", "job_templates/jt++gpu/")[1]["id"] == template["id"]
    assert api("GET", "job_templates/jt++other/") == (404, {"detail": "Not found."})
    status, types = api("GET", "credential_types/Google Compute Engine+cloud/")
    assert status == 200 and types["namespace"] == "gce"
    assert api("GET", "job_templates/", colour="red") == (400, {"detail": "Cannot resolve keyword 'colour' into field."})


def test_lists_page(api):
    first = api("GET", "credential_types/")[1]
    assert first["count"] == 5 and len(first["results"]) == 2 and first["next"]
    assert "page=2" in first["next"] and first["previous"] is None


def test_foreign_keys_playbooks_and_unique_names(api, template):
    assert api("POST", "job_templates/", {"name": "x", "project": 999, "playbook": "playbooks/site.yml"}) == (
        400, {"project": ['Invalid pk "999" - object does not exist.']})
    assert api("POST", "job_templates/", {"name": "x", "project": template["project"], "inventory": template["inventory"],
                                          "playbook": "playbooks/missing.yml"}) == (
        400, {"playbook": ["Playbook not found for project."]})
    status, answer = api("POST", "job_templates/", {"name": "jt", "project": template["project"],
                                                    "inventory": template["inventory"], "playbook": "playbooks/site.yml",
                                                    "organization": template["organization"]})
    assert status == 400 and "already exists" in answer["__all__"][0]
    assert api("POST", "inventory_sources/", {"name": "s", "inventory": template["inventory"], "source": "scm",
                                              "source_project": template["project"], "source_path": "nope"}) == (
        400, {"source_path": ['Invalid inventory file path "nope" for this project.']})


def test_credentials_inputs_secrets_and_binding(awx, api, template):
    gce = api("GET", "credential_types/", name="Google Compute Engine")[1]["results"][0]
    k8s = api("GET", "credential_types/", kind="kubernetes")[1]["results"][0]
    scm = api("GET", "credential_types/", kind="scm")[1]["results"][0]
    assert api("POST", "credentials/", {"name": "g", "credential_type": gce["id"], "inputs": {"username": "sa"}}) == (
        400, {"inputs": {"ssh_key_data": ["required for Google Compute Engine"]}})
    status, answer = api("POST", "credentials/", {"name": "g", "credential_type": gce["id"], "inputs": {"user": "sa"}})
    assert status == 400 and "user" in answer["inputs"]
    created = []
    for name, ctype, inputs in (("g1", gce, {"username": "sa", "ssh_key_data": "KEY"}),
                                ("g2", gce, {"username": "sb", "ssh_key_data": "KEY2"}),
                                ("k", k8s, {"host": "https://k", "bearer_token": "TOKEN"}),
                                ("s", scm, {"username": "git"})):
        status, credential = api("POST", "credentials/", {"name": name, "credential_type": ctype["id"], "inputs": inputs})
        assert status == 201, credential
        created.append(credential)
    assert created[0]["inputs"] == {"username": "sa", "ssh_key_data": "$encrypted$"}
    url = "job_templates/%d/credentials/" % template["id"]
    assert api("POST", url, {"id": created[0]["id"]}) == (204, None)
    assert api("POST", url, {"id": created[1]["id"]}) == (400, {"error": "Cannot assign multiple Google Compute Engine credentials."})
    assert api("POST", url, {"id": created[3]["id"]}) == (400, {"error": "Cannot assign a Credential of kind `scm`."})
    assert api("POST", url, {"id": created[2]["id"]}) == (204, None)
    assert awx.credentials_of(template["id"]) == ["g1", "k"]
    assert api("POST", url, {"id": created[0]["id"], "disassociate": True}) == (204, None)
    assert [c["name"] for c in api("GET", url)[1]["results"]] == ["k"]


def test_requests_without_the_token_are_refused(awx):
    response = requests.get(awx.url + "/api/v2/job_templates/", timeout=10)
    assert response.status_code == 401
    assert response.headers["X-API-Product-Name"] == "AWX"


def test_a_launch_sends_every_default_and_needs_every_required_answer(awx, api, template):
    """AWX's _update_unified_job_kwargs: a question's default (even '') is an extra var of every launch."""
    spec = {"name": "s", "description": "", "spec": [
        QUESTION, dict(QUESTION, variable="prefix", type="text", default=""),
        {"question_name": "Zone", "variable": "zone", "type": "text", "required": True},
        {"question_name": "Pool", "variable": "pool", "type": "text", "required": False}]}
    assert api("POST", "job_templates/%d/survey_spec/" % template["id"], spec) == (200, None)
    assert api("PATCH", "job_templates/%d/" % template["id"], {"survey_enabled": True})[0] == 200
    assert awx.launch_extra_vars(template["id"], {"zone": "a"}) == {"nodes": 2, "prefix": "", "zone": "a"}
    assert awx.launch_extra_vars(template["id"], {"zone": "a", "nodes": 4, "pool": "p"}) == {
        "nodes": 4, "prefix": "", "zone": "a", "pool": "p"}
    with pytest.raises(Exception, match="'zone' value missing"):
        awx.launch_extra_vars(template["id"], {})
    assert api("PATCH", "job_templates/%d/" % template["id"], {"survey_enabled": False})[0] == 200
    assert awx.launch_extra_vars(template["id"], {}) == {}, "a disabled survey adds nothing"
    assert api("DELETE", "job_templates/%d/survey_spec/" % template["id"]) == (200, None)
