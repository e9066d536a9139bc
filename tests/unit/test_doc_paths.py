# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every source or test path the docs, role READMEs, argument specs and plugin docstrings name exists.

After files move, a stale mention is how a newcomer gets lost: this fails on the first one.
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# plugins/module_utils/_gcp/offers.py, module_utils/_catalog/mig.py, plugin_utils/_operators/inputs.py ...
PATH = re.compile(r"(?<![\w/])(?:plugins/)?((?:module_utils|plugin_utils|modules|filter|doc_fragments|action)/[\w/]+\.(?:py|yml))")
# tests/integration/test_role_apply.py, tests/unit/test_layout.py ... (a test a doc tells people to run or read)
TEST_PATH = re.compile(r"(?<![\w/])(tests/[\w/.-]+\.py)\b")
SCANNED_SUFFIXES = (".md", ".py", ".yml", ".yaml")
SKIPPED = ("tests/output", ".venv", ".collections", ".git", "changelogs")


def _texts():
    for top in ("docs", "roles", "plugins", "benchmarks", "tests/fakes", "tests/charts", "README.md", "CONTRIBUTING.md"):
        base = os.path.join(ROOT, top)
        if os.path.isfile(base):
            yield top, base
            continue
        for folder, _dirs, files in os.walk(base):
            for name in files:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)
                if name.endswith(SCANNED_SUFFIXES) and not rel.startswith(SKIPPED):
                    yield rel, path


def _stale(texts):
    stale = []
    for rel, path in texts:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                for mention in PATH.findall(line):
                    if not os.path.exists(os.path.join(ROOT, "plugins", mention)):
                        stale.append("%s:%d names plugins/%s" % (rel, number, mention))
                for mention in TEST_PATH.findall(line):
                    if not os.path.exists(os.path.join(ROOT, mention)):
                        stale.append("%s:%d names %s" % (rel, number, mention))
    return stale


def test_every_named_source_path_exists():
    assert _stale(_texts()) == []


def test_a_stale_path_is_reported(tmp_path):
    doc = tmp_path / "old.md"
    doc.write_text("The catalog is in `plugins/module_utils/_gpudirect.py`; the MIG one in module_utils/_catalog/mig.py.\n"
                   "Run tests/unit/test_layout.py, not tests/unit/test_contract.py.\n")
    assert _stale([("old.md", str(doc))]) == ["old.md:1 names plugins/module_utils/_gpudirect.py",
                                              "old.md:2 names tests/unit/test_contract.py"]
