# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller loads the collection's filters once, in the first task of a playbook (issue #22).

Each task runs in a worker forked from the controller for it; a worker inherits what the controller had imported
when it forked. A probe filter (a playbook filter plugin, not the collection's) reports whether the worker that
templates it already holds a filter file of the collection, which only the controller can have loaded.
"""

from __future__ import annotations

import textwrap

import pytest

COLLECTION_FILTER = "ansible_collections.gpu_ops.cluster.plugins.filter.gpudirect"

PROBE = textwrap.dedent('''
    import gc
    import sys


    def inherited(value):
        return %r in sys.modules


    def frozen(value):
        return gc.get_freeze_count()


    class FilterModule:
        def filters(self):
            return {"inherited": inherited, "frozen": frozen}
    ''' % COLLECTION_FILTER)

FIRST_PLAY = """
- name: The first play of a playbook of the collection
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Inventory check and render notice
      ansible.builtin.import_role:
        name: gpu_ops.cluster.render_notice
        tasks_from: start
      vars:
        render_notice_playbook: probe.yml
        render_notice_hosts: []
"""

PROBE_PLAY = """
- name: A later play
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Ask the worker what it inherited
      ansible.builtin.set_fact:
        probe_inherited: "{{ 'x' | inherited }}"
        probe_frozen: "{{ 'x' | frozen }}"
"""


@pytest.fixture
def probe_env(tmp_path):
    folder = tmp_path / "filter_plugins"
    folder.mkdir()
    (folder / "probe.py").write_text(PROBE, encoding="utf-8")
    return {"ANSIBLE_FILTER_PLUGINS": str(folder)}


def _probe(result):
    result.assert_ok()
    facts = result.task("Ask the worker what it inherited")["result"]["ansible_facts"]
    return facts["probe_inherited"], int(facts["probe_frozen"])


def test_a_worker_inherits_the_filters_the_first_task_loaded(run_playbook, probe_env):
    inherited, frozen = _probe(run_playbook(FIRST_PLAY + PROBE_PLAY, env=probe_env))
    assert inherited is True
    # and its garbage collector leaves the controller's objects alone (plugin_utils/_workers.py): tens of thousands
    assert frozen > 10000


def test_without_that_task_a_worker_has_not_loaded_them(run_playbook, probe_env):
    # the probe itself loads nothing of the collection: a playbook without the render notice leaves it False, and the
    # worker's collector walks what it inherited (only what the interpreter froze at start-up is frozen: none on Python
    # 3.11, a few hundred objects on 3.12)
    inherited, frozen = _probe(run_playbook(PROBE_PLAY, env=probe_env))
    assert inherited is False and frozen < 1000
