# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWX survey questions from argument specs (plugins/plugin_utils/_awx/survey.py), called directly
(tests/unit/plugins/filter/test_awx_survey.py runs the filter on the roles' real argument specs)."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx import survey

SPECS = {"argument_specs": {"main": {"options": {
    "cluster": {"type": "str", "required": True, "description": ["Name of the C(GKE) cluster. Must exist."]},
    "fabric": {"type": "str", "choices": ["", "tcpx", "tcpxo"], "default": "tcpxo", "description": "Fabric."},
    "node_count": {"type": "int", "default": 2},
    "threshold": {"type": "float", "default": 0.9},
    "zones": {"type": "list", "elements": "str", "choices": ["a", "b", "c"], "default": ["a", "b"]},
    "token": {"type": "str", "no_log": True, "default": "not-shown"},
    "wait": {"type": "bool", "default": True},
    "extra": {"type": "dict"},
    "pools": {"type": "list", "elements": "dict", "options": {"name": {"type": "str"}}},
}}, "teardown": {"options": {"cluster": {"type": "str"}}}}}


def test_each_askable_type_becomes_its_question():
    by_variable = {q["variable"]: q for q in survey.questions(SPECS)}
    assert list(by_variable) == ["cluster", "fabric", "node_count", "threshold", "zones", "token"]
    assert by_variable["cluster"] == {"question_name": "Name of the GKE cluster", "variable": "cluster",
                                      "question_description": "Name of the GKE cluster. Must exist. Unanswered: the "
                                                              "inventory's value (the role requires one).",
                                      "required": False, "type": "text"}
    assert by_variable["fabric"]["type"] == "multiplechoice" and by_variable["fabric"]["choices"] == ["tcpx", "tcpxo"]
    assert by_variable["node_count"]["type"] == "integer" and by_variable["threshold"]["type"] == "float"
    assert by_variable["zones"]["type"] == "multiselect" and by_variable["token"]["type"] == "password"
    assert by_variable["node_count"]["question_name"] == "node_count", "no description: the variable is the name"


@pytest.mark.parametrize("option, reason", [
    ({"type": "bool"}, "bool: an AWX answer would be the string 'true'/'false', not a boolean"),
    ({"type": "dict"}, "type dict has no AWX question type (set it in the inventory)"),
    ({"type": "list", "elements": "int"}, "type list of int has no AWX question type (set it in the inventory)"),
    ({"type": "list", "elements": "dict", "options": {}}, "has suboptions (set it in the inventory)"),
])
def test_unaskable_options_say_why(option, reason):
    assert survey.unaskable_reason(option) == reason
    with pytest.raises(ValueError, match="option wait cannot be a survey question"):
        survey.question("wait", option)


def test_long_first_sentences_are_cut_for_the_question_name():
    item = survey.question("name", {"description": "x" * 200})
    assert len(item["question_name"]) == survey.QUESTION_NAME_MAX and item["question_name"].endswith("...")


def test_question_names_of_exactly_80_characters_are_kept():
    """A question name is a form label of at most 80 characters: a sentence of 80 is kept whole, one of 81 is cut to 80."""
    assert survey.question("name", {"description": "y" * 80})["question_name"] == "y" * 80
    assert survey.question("name", {"description": "y" * 81})["question_name"] == "y" * 77 + "..."


def test_a_source_without_entry_point_asks_the_main_options():
    spec = survey.survey_spec([dict(argument_specs=SPECS, options=["cluster"])], "Main")
    assert [q["variable"] for q in spec["spec"]] == ["cluster"] and spec["spec"][0]["question_name"] == "Name of the GKE cluster"
    spec = survey.survey_spec([dict(argument_specs=SPECS, entry_point="teardown", options=["cluster"])], "Teardown")
    assert spec["spec"][0]["question_name"] == "cluster"


def test_named_options_must_exist_and_be_askable():
    assert [q["variable"] for q in survey.questions(SPECS, options=["zones", "cluster"])] == ["zones", "cluster"]
    with pytest.raises(ValueError, match=r"^gke \(entry point main\) has no option 'nodes'; it has: cluster, "):
        survey.questions(SPECS, options=["nodes"], role="gke")
    with pytest.raises(ValueError, match=r"^gke \(entry point main\): option wait cannot be a survey question"):
        survey.questions(SPECS, options=["wait"], role="gke")
    with pytest.raises(ValueError, match=r"no entry point 'upgrade' \(the file has: main, teardown\)"):
        survey.questions(SPECS, entry_point="upgrade")
    with pytest.raises(ValueError, match="is not a valid variable name"):
        survey.question("bad-name", {"type": "str"})


def test_survey_spec_asks_a_shared_variable_once():
    spec = survey.survey_spec([
        dict(argument_specs=SPECS, role="gke", options=["cluster", "node_count"]),
        dict(argument_specs=SPECS, role="gke", entry_point="teardown"),
    ], "Deploy", "GKE GPUDirect")
    assert [q["variable"] for q in spec["spec"]] == ["cluster", "node_count"]
    assert spec["spec"][0]["question_description"].endswith("(the role requires one)."), "the first source wins"
    assert survey.survey_spec([dict(argument_specs=SPECS, options=[])], "Nothing") == {}


def test_no_question_overrides_the_inventory_unless_answered():
    """AWX adds every question's default (when not None) to the extra vars of each launch, and a required question
    must be answered: either would override each host's inventory value (see the engine's docstring)."""
    items = survey.questions(SPECS)
    assert all("default" not in q and q["required"] is False for q in items), items
    by_variable = {q["variable"]: q for q in items}
    # what the role does with an unanswered question is in the description, not in a default
    assert by_variable["fabric"]["question_description"] == (
        "Fabric. Unanswered: the inventory's value, else the role's default (tcpxo).")
    assert by_variable["zones"]["question_description"].endswith("else the role's default (a, b).")
    assert "not-shown" not in by_variable["token"]["question_description"], "a no_log default is never shown"
