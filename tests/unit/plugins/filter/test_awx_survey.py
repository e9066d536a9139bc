# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""awx_survey_spec: AWX surveys generated from the roles' argument specs.

Every generated survey is checked with the AWX double's survey validator, which applies the checks of
AWX's own JobTemplateSurveySpec view, so a survey that passes here is one AWX accepts.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_survey import awx_survey_spec
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx import survey as _survey
from ansible_collections.gpu_ops.cluster.tests.doubles.awx import validate_survey_spec

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE_SPECS = {path.parts[-3]: yaml.safe_load(path.read_text(encoding="utf-8"))
              for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml"))}
ROLE_DEFAULTS = yaml.safe_load((ROOT / "roles/awx_job_templates/defaults/main.yml").read_text(encoding="utf-8"))

SPEC = {"argument_specs": {"main": {"options": {
    "demo_name": {"type": "str", "required": True, "description": ["Name of the thing. Used everywhere."]},
    "demo_profile": {"type": "str", "choices": ["", "tcpx", "tcpxo"], "default": "tcpxo",
                     "description": "The C(tcpx) or C(tcpxo) fabric."},
    "demo_prefix": {"type": "str", "default": "", "description": "Prefix."},
    "demo_nodes": {"type": "int", "default": 2, "description": "Nodes."},
    "demo_gbps": {"type": "float", "description": "Threshold."},
    "demo_token": {"type": "str", "no_log": True, "default": "x", "description": "A token."},
    "demo_benchmarks": {"type": "list", "elements": "str", "choices": ["a", "b", "c"], "default": ["a", "b"]},
    "demo_zones": {"type": "list", "elements": "str", "default": []},
    "demo_enabled": {"type": "bool", "default": True},
    "demo_labels": {"type": "dict", "default": {}},
    "demo_pool": {"type": "dict", "options": {"name": {"type": "str"}}},
}}}}


def by_variable(spec):
    return {q["variable"]: q for q in spec["spec"]}


def test_types_and_choices_follow_the_spec_without_defaults():
    spec = awx_survey_spec([{"argument_specs": SPEC, "role": "demo"}], "Demo", "a demo")
    questions = by_variable(spec)
    assert list(questions) == ["demo_name", "demo_profile", "demo_prefix", "demo_nodes", "demo_gbps", "demo_token",
                               "demo_benchmarks"]
    assert questions["demo_name"] == {"question_name": "Name of the thing", "variable": "demo_name", "type": "text",
                                      "required": False, "question_description": "Name of the thing. Used everywhere. "
                                      "Unanswered: the inventory's value (the role requires one)."}
    # '' is not offered; markup becomes plain text
    assert questions["demo_profile"]["type"] == "multiplechoice"
    assert questions["demo_profile"]["choices"] == ["tcpx", "tcpxo"]
    assert questions["demo_profile"]["question_name"] == "The tcpx or tcpxo fabric"
    assert questions["demo_nodes"]["type"] == "integer" and questions["demo_gbps"]["type"] == "float"
    assert questions["demo_token"]["type"] == "password"
    assert questions["demo_benchmarks"]["type"] == "multiselect"
    # no defaults: AWX would send each one as an extra var on every launch, overriding the inventory
    assert not [q for q in questions.values() if "default" in q]
    assert validate_survey_spec(spec, None) == spec


@pytest.mark.parametrize("option, reason", [
    ("demo_enabled", "bool"), ("demo_labels", "type dict"), ("demo_zones", "type list of str"),
    ("demo_pool", "suboptions"),
])
def test_an_option_a_survey_cannot_carry_is_an_error_when_named(option, reason):
    with pytest.raises(AnsibleFilterError, match="demo .*%s.*%s" % (option, reason)):
        awx_survey_spec([{"argument_specs": SPEC, "role": "demo", "options": [option]}], "Demo")


def test_unknown_option_or_entry_point_is_an_error_naming_what_exists():
    with pytest.raises(AnsibleFilterError, match="demo .*has no option 'demo_nope'; it has: demo_benchmarks"):
        awx_survey_spec([{"argument_specs": SPEC, "role": "demo", "options": ["demo_nope"]}], "Demo")
    with pytest.raises(AnsibleFilterError, match="no entry point 'teardown' .*main"):
        awx_survey_spec([{"argument_specs": SPEC, "role": "demo", "entry_point": "teardown"}], "Demo")
    with pytest.raises(AnsibleFilterError, match="no argument specs for role 'other'"):
        awx_survey_spec([{"role": "other"}], "Demo", role_specs={"demo": SPEC})
    with pytest.raises(AnsibleFilterError, match="expected a list of dicts"):
        awx_survey_spec("demo", "Demo")


def test_named_options_keep_their_order_and_a_repeated_variable_is_asked_once():
    sources = [{"role": "demo", "options": ["demo_nodes", "demo_name"]},
               {"role": "demo", "options": ["demo_name", "demo_gbps"]}]
    spec = awx_survey_spec(sources, "Demo", role_specs={"demo": SPEC})
    assert [q["variable"] for q in spec["spec"]] == ["demo_nodes", "demo_name", "demo_gbps"]


def test_no_question_gives_no_survey():
    assert awx_survey_spec([], "Demo") == {}


@pytest.mark.parametrize("role, entry_point", [(role, entry) for role, spec in ROLE_SPECS.items()
                                               for entry in spec["argument_specs"]])
def test_every_role_entry_point_makes_a_survey_awx_accepts(role, entry_point):
    spec = awx_survey_spec([{"role": role, "entry_point": entry_point}], role, role_specs=ROLE_SPECS)
    if spec:
        assert validate_survey_spec(spec, None) == spec
    options = ROLE_SPECS[role]["argument_specs"][entry_point].get("options") or {}
    asked = {q["variable"] for q in spec.get("spec", [])}
    assert asked == {name for name, opt in options.items() if _survey.unaskable_reason(opt) is None}


@pytest.mark.parametrize("template", ROLE_DEFAULTS["awx_job_templates_templates"], ids=lambda t: t["name"])
def test_the_shipped_job_templates_name_existing_options_and_playbooks(template):
    assert (ROOT / template["playbook"]).is_file()
    spec = awx_survey_spec(template.get("survey", []), template["name"], role_specs=ROLE_SPECS)
    # a template whose roles have no run-wide option a survey can carry asks nothing (Validate GPU hosts)
    assert spec == {} if not template.get("survey") else spec and validate_survey_spec(spec, None) == spec
