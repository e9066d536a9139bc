# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input checks every filter makes (plugins/plugin_utils/_core/inputs.py): each names the argument and
shows the value it got (tests/unit/plugins/filter/test_filter_bad_inputs.py drives them through the filters)."""

from __future__ import annotations

import math

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs


def test_numbers():
    assert inputs.number("threshold", 0.5) == 0.5
    assert inputs.number("threshold", " 12.5 ") == 12.5
    assert inputs.number("threshold", None, allow_none=True) is None
    assert inputs.whole_number("count", "+3") == 3 and inputs.whole_number("count", 4.0) == 4


@pytest.mark.parametrize("function, value, kwargs, message", [
    (inputs.number, True, {}, "threshold: must be a number, got True"),
    (inputs.number, "fast", {}, "threshold: must be a number, got 'fast'"),
    (inputs.number, [1], {}, "threshold: must be a number, got list"),
    (inputs.number, math.inf, {}, "threshold: must be a finite number, got inf"),
    (inputs.number, -1, dict(minimum=0), "threshold: must be at least 0, got -1"),
    (inputs.whole_number, 1.5, {}, "threshold: must be a whole number, got 1.5"),
    (inputs.whole_number, None, {}, "threshold: must be a whole number, got None"),
    (inputs.whole_number, 0, dict(minimum=1), "threshold: must be at least 1, got 0"),
    (inputs.boolean, "yes", {}, "threshold: must be true or false, got 'yes'"),
    (inputs.text, "  ", {}, "threshold: must be a non-empty string, got '  '"),
    (inputs.version_text, 1.3, {}, "threshold: must be a string (quote it: an unquoted 1.30 reads as the number 1.3)"),
    (inputs.mapping, [], {}, "threshold: must be a dict, got list"),
    (inputs.objects, [{}, "pod"], {}, "threshold[1]: must be a Kubernetes object (a dict), got str"),
    (inputs.objects, {}, {}, "threshold: must be a list of Kubernetes objects, got dict"),
    (inputs.output_text, None, {}, "threshold: is null - no output was captured"),
    (inputs.output_text, ["ok", 1], {}, "threshold: a list of output lines must hold only strings"),
    (inputs.output_text, ["ok"], dict(lines=False), "threshold: must be command output text, got list"),
])
def test_bad_values_name_the_argument(function, value, kwargs, message):
    with pytest.raises(ValueError) as caught:
        function("threshold", value, **kwargs)
    assert str(caught.value).startswith(message)


def test_long_values_are_cut_in_messages():
    with pytest.raises(ValueError) as caught:
        inputs.boolean("flag", "x" * 500)
    assert len(str(caught.value)) < 100 and str(caught.value).endswith("...")


def test_good_values_come_back_as_given():
    assert inputs.text("name", "gpu") == "gpu" and inputs.mapping("values", None) is None
    assert inputs.output_text("stdout", ["a", "b"]) == ["a", "b"] and inputs.output_text("stdout", "a") == "a"
    assert inputs.version_text("version", "1.30") == "1.30"


def test_plain_turns_containers_into_plain_values():
    class Tagged(str):
        pass

    value = inputs.plain({1: (Tagged("a"), [Tagged("b")])})
    assert value == {"1": ["a", ["b"]]}
    assert not isinstance(value["1"][0], Tagged) and not isinstance(value["1"][1][0], Tagged)


class FilterError(Exception):
    pass


def test_errors_as_turns_value_and_type_errors_into_the_filters_error():
    @inputs.errors_as(FilterError)
    def my_filter(value):
        if value == "type":
            raise TypeError("not that type")
        return inputs.whole_number("value", value)

    assert my_filter.__name__ == "my_filter" and my_filter("3") == 3
    with pytest.raises(FilterError, match=r"^my_filter: value: must be a whole number"):
        my_filter("x")
    with pytest.raises(FilterError, match=r"^my_filter: not that type$"):
        my_filter("type")
    with pytest.raises(FilterError, match=r"^other: value: must be true or false"):
        inputs.filtered(FilterError, "other", inputs.boolean, "value", 1)
