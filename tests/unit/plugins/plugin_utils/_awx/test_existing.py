# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What AWX already holds under a setup's names (plugins/plugin_utils/_awx/existing.py), on hand-written API lists;
tests/integration/test_playbook_awx_setup.py reads them from the AWX double."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_survey import awx_setup_conflicts
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.existing import conflicts

from ansible.errors import AnsibleFilterError


def obj(oid, name, org=None, org_name=None):
    summary = {"organization": {"id": org, "name": org_name}} if org_name else {}
    return {"id": oid, "name": name, "organization": org, "summary_fields": summary}


OLD = obj(1, "gpu_ops")
SETUP = {"organizations": [OLD], "projects": [obj(2, "gpu_ops.cluster", 1, "gpu_ops")],
         "inventories": [obj(3, "GPU fleet", 1, "gpu_ops")], "credentials": [obj(4, "GCP", 1, "gpu_ops")]}


def test_a_setup_of_the_same_organization_goes_on():
    assert conflicts(SETUP, "gpu_ops", "gpu_ops.cluster", ["GPU fleet"], ["GCP"]) == []


def test_a_fresh_controller_goes_on():
    assert conflicts({}, "gpu_ops", "gpu_ops.cluster", ["GPU fleet"], ["GCP"]) == []
    assert conflicts({"organizations": [], "projects": []}, "new", "p", [], []) == []


def test_a_renamed_organization_is_refused_with_what_exists_and_how_to_proceed():
    read = {"organizations": [], "projects": SETUP["projects"], "inventories": SETUP["inventories"],
            "credentials": SETUP["credentials"]}
    problems = conflicts(read, "platform", "gpu_ops.cluster", ["GPU fleet"], ["GCP"])
    assert len(problems) == 1
    assert problems[0].startswith("awx_job_templates_organization: platform is not an organization in AWX, but this setup's "
                                  "project gpu_ops.cluster, inventory GPU fleet, credential GCP already exist in organization gpu_ops:")
    assert "awx.awx.organization with name: gpu_ops and new_name: platform" in problems[0]
    assert problems[0].endswith("set awx_job_templates_organization: gpu_ops")


@pytest.mark.parametrize("kind", ["projects", "inventories", "credentials"])
def test_any_one_object_of_the_setup_elsewhere_is_a_rename(kind):
    read = {kind: SETUP[kind]}
    problems = conflicts(read, "platform", "gpu_ops.cluster", ["GPU fleet"], ["GCP"])
    assert len(problems) == 1 and "is not an organization in AWX" in problems[0]


def test_another_projects_name_alone_is_not_this_setup():
    read = {"projects": [obj(2, "someone else's", 1, "gpu_ops")], "inventories": [obj(3, "other", 1, "gpu_ops")]}
    assert conflicts(read, "platform", "gpu_ops.cluster", ["GPU fleet"], []) == []


def test_two_old_organizations_are_named_and_the_advice_keeps_a_placeholder():
    read = {"projects": [obj(2, "gpu_ops.cluster", 1, "a")], "inventories": [obj(3, "GPU fleet", 5, "b")]}
    (problem,) = conflicts(read, "platform", "gpu_ops.cluster", ["GPU fleet"], [])
    assert "exist in organization a, b:" in problem and "name: <old name> and new_name: platform" in problem


def test_organization_names_come_from_the_read_organizations_without_summary_fields():
    read = {"organizations": [obj(7, "platform"), obj(1, "gpu_ops")],
            "inventories": [obj(3, "GPU fleet", 1), obj(8, "GPU fleet", 7)], "credentials": [obj(9, "GCP", 12)]}
    problems = conflicts(read, "platform", "p", ["lab", "GPU fleet"], ["GCP"])
    assert problems == [
        "awx_job_templates_inventories[1].name: inventory GPU fleet also exists in organization gpu_ops, and awx.awx.job_template "
        "finds inventories by name alone (it would fail with 'returned 2 items'): choose a name no other organization uses, "
        "or remove or rename the other inventory",
        "awx_job_templates_credentials[0].name: credential GCP also exists in organization id 12, and awx.awx.job_template "
        "finds credentials by name alone (it would fail with 'returned 2 items'): choose a name no other organization uses, "
        "or remove or rename the other credential"]


def test_an_object_without_organization_is_elsewhere():
    read = {"organizations": [obj(7, "platform")], "credentials": [obj(9, "GCP")]}
    (problem,) = conflicts(read, "platform", "p", [], ["GCP"])
    assert "credential GCP also exists in organization (none)" in problem


def test_the_filter_checks_its_arguments():
    assert awx_setup_conflicts(SETUP, "gpu_ops", "gpu_ops.cluster", ["GPU fleet"], ["GCP"]) == []
    with pytest.raises(AnsibleFilterError, match="expected a dict of endpoint"):
        awx_setup_conflicts({"projects": {}}, "gpu_ops", "p", [], [])
    with pytest.raises(AnsibleFilterError, match="credentials must be a list of names"):
        awx_setup_conflicts({}, "gpu_ops", "p", [], "GCP")
