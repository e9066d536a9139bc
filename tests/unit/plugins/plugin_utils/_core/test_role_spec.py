# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's variables against an entry point's argument spec (plugins/plugin_utils/_core/role_spec.py), called directly, and
through the filter argument_spec_errors. tests/integration/test_playbook_preflight.py runs it in the preflight."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_survey import argument_spec_errors
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import role_spec as _role_spec

UNSET = "__gpu_ops_unset__"
OPTIONS = {
    "cluster": {"type": "str", "required": True},
    "fabric": {"type": "str", "choices": ["", "tcpx", "tcpxo"], "default": "tcpxo"},
    "node_count": {"type": "int", "default": 2},
    "zones": {"type": "list", "elements": "str", "default": []},
}


def _values(**given):
    values = dict((name, UNSET) for name in OPTIONS)
    values.update(given)
    return values


def test_values_that_pass_give_no_message():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", fabric="tcpx", node_count=4, zones=["z"]), UNSET) == []


def test_an_unset_variable_takes_the_default_and_a_required_one_is_missing():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3"), UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, _values(), UNSET) == ["missing required arguments: cluster"]


def test_the_messages_are_the_validators_each_naming_the_option_and_what_it_takes():
    errors = _role_spec.spec_errors(OPTIONS, _values(cluster="a3", fabric="ib", node_count="many"), UNSET)
    assert len(errors) == 2, errors
    assert any(e.startswith("value of fabric must be one of: , tcpx, tcpxo, got: ib") for e in errors), errors
    assert any("node_count" in e and "int" in e for e in errors), errors


def test_a_text_number_is_converted_as_the_spec_says_and_null_is_a_given_value():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", node_count="8"), UNSET) == []
    # a variable set to null is given, unlike an unset one (validate_argument_spec: required means present)
    assert _role_spec.spec_errors(OPTIONS, _values(cluster=None), UNSET) == []


def test_an_equal_mark_is_unset_too():
    # the template's default= and the filter's mark are equal texts, not one object
    mark = "".join(["__gpu_ops", "_unset__"])
    assert mark is not UNSET
    assert _role_spec.spec_errors(OPTIONS, {"cluster": "a3", "fabric": mark}, UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, {"cluster": mark}, UNSET) == ["missing required arguments: cluster"]


def test_only_the_exact_mark_is_unset():
    # the mark inside a list, or another text, is a value like any other
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", zones=[UNSET]), UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, _values(cluster=UNSET + " "), UNSET) == []
    # an integer 0 is not the mark "0"
    assert _role_spec.spec_errors({"n": {"type": "int", "required": True}}, {"n": 0}, "0") == []
    assert _role_spec.spec_errors({"n": {"type": "int", "required": True}}, {"n": "0"}, "0") == ["missing required arguments: n"]


@pytest.mark.parametrize("options, values, message", [
    ([], {}, "options: expected the options of an entry point (a dict), got list"),
    (OPTIONS, ["cluster"], "values: expected option names and values (a dict), got list"),
    (OPTIONS, {"cluster": "a", "clutser": "b", "zone": "c"}, "values: not options of the spec: clutser, zone"),
])
def test_what_is_not_an_option_and_its_values_is_refused(options, values, message):
    with pytest.raises(ValueError) as raised:
        _role_spec.spec_errors(options, values, UNSET)
    assert str(raised.value) == message


def test_the_filter_takes_the_default_mark_and_names_itself_in_its_errors():
    assert argument_spec_errors(OPTIONS, _values()) == ["missing required arguments: cluster"]
    assert argument_spec_errors(OPTIONS, {"cluster": "x", "node_count": "-"}, unset="-") == []
    with pytest.raises(AnsibleFilterError) as raised:
        argument_spec_errors(OPTIONS, {"nodes": 1})
    assert str(raised.value) == "argument_spec_errors: values: not options of the spec: nodes"
