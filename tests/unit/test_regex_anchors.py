# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No regular expression in plugins/ ends with ``$``.

Python's ``$`` also matches before a final newline, so a validator written ``^name$`` accepts ``"name\\n"``:
a resource-group name, an image reference or an unquoted shell value with a newline went through (#24 §3).
Patterns end with ``\\Z`` instead; a pattern that really means "end of a line" needs re.MULTILINE, and none does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
# a raw string literal whose last character before the closing quote is an unescaped $
_DOLLAR_AT_END = re.compile(r"""\br(["'])(?:(?!\1).)*?(?<!\\)\$\1""")


def _offenders():
    found = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _DOLLAR_AT_END.search(line):
                found.append("%s:%d: %s" % (path.relative_to(PLUGINS.parent), number, line.strip()))
    return found


def test_no_pattern_ends_with_a_dollar():
    assert _offenders() == []


def test_the_scan_finds_a_dollar_anchor():
    assert _DOLLAR_AT_END.search('NAME = re.compile(r"^[a-z]+$")')
    assert _DOLLAR_AT_END.search("re.match(r'^x$', text)")
    assert not _DOLLAR_AT_END.search(r'NAME = re.compile(r"^[a-z]+\Z")')
    assert not _DOLLAR_AT_END.search(r'PRICE = re.compile(r"^\$[0-9]+\Z")')


@pytest.mark.parametrize("module, name, good", [
    ("_azure.nodepool", "RESOURCE_GROUP", "gpu-rg"),
    ("_azure.nodepool", "SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000000"),
    ("_core.problems", "LABEL_VALUE", "a100"),
    ("_catalog.nccl", "_ENV_NAME", "NCCL_DEBUG"),
])
def test_a_trailing_newline_is_refused(module, name, good):
    import importlib
    pattern = getattr(importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.module_utils." + module), name)
    assert pattern.match(good)
    assert not pattern.match(good + "\n")
