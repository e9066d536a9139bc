# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's phases and check ids against the registry (plugins/plugin_utils/_validate/options.py); the
playbook's preflight runs them in tests/integration/test_playbook_validate.py."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.filter.validate_options import validate_option_problems
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.options import option_problems

DEFAULT = ["preflight", "deployment", "conformance"]


@pytest.mark.parametrize("phases, checks", [
    (DEFAULT, []), (DEFAULT + ["performance"], ["perf.nccl_avg_busbw"]), (["deployment"], ["gpu.allocatable"]),
    (["conformance"], ["gpu.requests_advertised"])])
def test_known_phases_and_checks_of_them_pass(phases, checks):
    assert option_problems(phases, checks) == []


def test_an_unknown_phase_names_the_phases():
    (problem,) = option_problems(["deployment", "preformance"], [])
    assert problem.startswith("validate_phases[1]: 'preformance' is not a phase; choose from ")
    assert all(p in problem.split("choose from ")[1].split(", ") for p in DEFAULT + ["performance"])


@pytest.mark.parametrize("phases", [[], "deployment", None])
def test_phases_must_be_a_non_empty_list(phases):
    (problem,) = option_problems(phases, [])
    assert problem.startswith("validate_phases: must be a non-empty list of phases (preflight, ")


def test_an_unknown_check_names_the_checks_of_its_group():
    (problem,) = option_problems(DEFAULT, ["gpu.no_such_check"])
    assert problem.startswith("validate_checks[0]: 'gpu.no_such_check' is not a check id (docs/validate-checks.md lists them; "
                              "of its group: ")
    assert "gpu.allocatable" in problem and "mig.geometry" not in problem


def test_an_unknown_check_of_no_group():
    assert option_problems(DEFAULT, ["nothing", 7]) == [
        "validate_checks[0]: 'nothing' is not a check id (docs/validate-checks.md lists them)",
        "validate_checks[1]: 7 is not a check id (docs/validate-checks.md lists them)"]


def test_a_check_of_a_phase_that_does_not_run_would_not_run():
    assert option_problems(DEFAULT, ["gpu.allocatable", "perf.nccl_avg_busbw"]) == [
        "validate_checks[1]: perf.nccl_avg_busbw is a check of the performance phase, which validate_phases (preflight, "
        "deployment, conformance) does not list: it would not run"]


def test_checks_must_be_a_list_and_every_problem_comes_at_once():
    assert option_problems(["x"], "gpu.allocatable") == [
        option_problems(["x"], [])[0], "validate_checks: must be a list of check ids (docs/validate-checks.md)"]


def test_the_filter_takes_no_checks_as_none():
    assert validate_option_problems(DEFAULT) == [] and validate_option_problems(DEFAULT, None) == []
    assert validate_option_problems(["deployment"], ["perf.ib_write_bw"])[0].startswith("validate_checks[0]: perf.ib_write_bw")


def test_a_long_value_is_cut_to_sixty_characters():
    whole = "p" * 58                     # 60 with its quotes: shown whole
    assert option_problems([whole], [])[0].startswith("validate_phases[0]: '%s' is not a phase" % whole)
    (problem,) = option_problems(["p" * 59], [])
    assert problem.startswith("validate_phases[0]: '%s... is not a phase" % ("p" * 56))
