# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/mutate.py, the mutation check developers run on one engine: which mutants it makes."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutate.py"
_spec = importlib.util.spec_from_file_location("gpu_ops_mutate", str(SCRIPT))
mutate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutate)

SOURCE = '''
"""Module docstring: 1 < 2 stays."""


def limit(value, floor=0):
    """Docstring."""
    if value < floor and not value == 3:
        return floor + 1
    return "%d items" % value


def flag():
    return True
'''


def _changes(found):
    return [(m["function"], m["change"]) for m in found]


def test_every_kind_of_mutant_once_per_spot():
    found = mutate.mutants(SOURCE)
    assert _changes(found) == [
        ("limit", "0 -> 1"),               # the default floor=0
        ("limit", "And -> Or"),
        ("limit", "Lt -> LtE"),
        ("limit", "drop not"),
        ("limit", "Eq -> NotEq"),
        ("limit", "3 -> 4"),
        ("limit", "return None"),
        ("limit", "Add -> Sub"),
        ("limit", "1 -> 2"),
        ("limit", "return None"),          # the string formatting itself is not swapped
        ("flag", "return None"),
        ("flag", "True -> False"),
    ]
    for mutant in found:
        ast.parse(mutant["source"])
        assert '"""Module docstring: 1 < 2 stays."""' in mutant["source"] or "'Module docstring: 1 < 2 stays.'" in mutant["source"]


def test_each_mutant_changes_exactly_its_spot():
    namespace = {}
    drop_not = next(m for m in mutate.mutants(SOURCE) if m["change"] == "drop not")
    exec(compile(drop_not["source"], "<mutant>", "exec"), namespace)  # pylint: disable=exec-used
    # original: limit(-1) == 1 and limit(3, floor=5) == "3 items"; without the not, the other way round
    assert namespace["limit"](-1) == "-1 items" and namespace["limit"](3, floor=5) == 6
    flipped = next(m for m in mutate.mutants(SOURCE) if m["change"] == "True -> False")
    exec(compile(flipped["source"], "<mutant>", "exec"), namespace)  # pylint: disable=exec-used
    assert namespace["flag"]() is False and namespace["limit"](-1) == 1


def test_functions_filter():
    assert {m["function"] for m in mutate.mutants(SOURCE, {"flag"})} == {"flag"}
