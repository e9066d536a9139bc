# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/facts.md cannot rot: every symbol it names imports, every row names a source, every catalog is indexed."""

from __future__ import annotations

import importlib
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INDEX = os.path.join(ROOT, "docs", "facts.md")
PACKAGE = "ansible_collections.gpu_ops.cluster.plugins."
SYMBOL = re.compile(r"`((?:module_utils|plugin_utils)\.[\w.]+)\.(\w+)`")


def _rows():
    with open(INDEX, encoding="utf-8") as handle:
        lines = [line for line in handle if line.startswith("| ") and not line.startswith("| fact ")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if "---" not in line]


def test_every_indexed_symbol_exists():
    missing = []
    named = 0
    for fact, symbols, _source in _rows():
        for module, name in SYMBOL.findall(symbols):
            named += 1
            if not hasattr(importlib.import_module(PACKAGE + module), name):
                missing.append("%s.%s (%s)" % (module, name, fact))
    assert missing == []
    assert named >= 40


def test_every_row_names_a_symbol_and_a_source():
    for fact, symbols, source in _rows():
        assert SYMBOL.search(symbols), fact
        assert len(source) > 10, fact


def test_every_catalog_file_is_indexed():
    catalog = os.path.join(ROOT, "plugins", "module_utils", "_catalog")
    files = {"module_utils._catalog." + name[:-3] for name in os.listdir(catalog) if name.endswith(".py")}
    indexed = {module for _fact, symbols, _source in _rows() for module, _name in SYMBOL.findall(symbols)}
    assert files - indexed == set()


def test_a_wrong_symbol_would_be_caught(tmp_path, monkeypatch):
    """The check is not vacuous: a row naming a table that does not exist is reported."""
    wrong = tmp_path / "facts.md"
    wrong.write_text("| fact | symbol | source |\n| --- | --- | --- |\n"
                     "| MIG models | `module_utils._catalog.mig.NO_SUCH_TABLE` | the MIG user guide |\n")
    monkeypatch.setitem(globals(), "INDEX", str(wrong))
    try:
        test_every_indexed_symbol_exists()
    except AssertionError as error:
        assert "NO_SUCH_TABLE" in str(error)
    else:
        raise AssertionError("a missing symbol was not reported")
