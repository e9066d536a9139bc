# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md is the user guide: it names every module, filter, role and playbook the collection ships, gives each
playbook a command that runs it, and sends readers to benchmarks/README.md for the numbers."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def _names(folder, ending):
    return sorted(name[:-len(ending)] for name in os.listdir(os.path.join(ROOT, folder))
                  if name.endswith(ending) and not name.startswith("_"))


def _filters():
    """Every filter the collection ships: the names its FilterModule classes return, read from the source."""
    found = set()
    folder = os.path.join(ROOT, "plugins", "filter")
    for name in os.listdir(folder):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                source = handle.read()
            block = source[source.index("def filters(self):"):]
            found.update(re.findall(r'"([a-z0-9_]+)":\s*[a-z_]', block))
    return sorted(found)


@pytest.mark.parametrize("kind, names", [
    ("module", _names("plugins/modules", ".py")),
    ("filter", _filters()),
    ("role", sorted(os.listdir(os.path.join(ROOT, "roles")))),
])
def test_every_plugin_and_role_is_in_the_user_guide(kind, names):
    text = _readme()
    missing = [name for name in names if "`%s`" % name not in text]
    assert names and not missing, "%ss the README does not name: %s" % (kind, ", ".join(missing))


def test_every_filter_has_its_documentation_file():
    documented = _names("plugins/filter", ".yml")
    assert documented == _filters()


def test_every_playbook_has_a_command_that_runs_it():
    text = _readme()
    commands = re.findall(r"ansible-playbook[^\n`]*?playbooks/([a-z_]+\.yml)", text)
    commands += re.findall(r"^make (demo[a-z-]*)", text, re.M) and ["site.yml"]
    missing = [name for name in _names("playbooks", ".yml") if name + ".yml" not in commands]
    assert not missing, "playbooks without a command in the README: %s" % ", ".join(missing)


def test_the_numbers_live_in_the_benchmarks_readme():
    text = _readme()
    assert "(benchmarks/README.md)" in text
    assert os.path.isfile(os.path.join(ROOT, "benchmarks", "README.md"))
    # the guide keeps no benchmark diary of its own
    assert len(re.findall(r"\bx the ping play\b|\bping play's CPU\b", text)) == 0
