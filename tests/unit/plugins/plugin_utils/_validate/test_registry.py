# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check registry: statuses, never a silent pass, counts and exit status."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import registry
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Check, Missing, Skip


class FakeView(object):
    touched = set()


def _check(function, phase="deployment"):
    return Check("t.check", phase, "title", ["kubernetes.nodes"], "The thing is broken.", dict(role="r", variable="r_v"), function)


def test_passed_failed_skipped_and_other():
    assert registry.run_check(_check(lambda v: (["ok"], [])), FakeView())["status"] == "passed"
    failed = registry.run_check(_check(lambda v: (["e"], ["node a: bad", "node b: bad"])), FakeView())
    assert failed["status"] == "failed"
    assert failed["cause"] == "The thing is broken."
    assert failed["fix"] == "role gpu_ops.cluster.r, variable r_v"
    assert failed["message"] == "node a: bad; node b: bad"
    assert failed["evidence"] == ["e"]

    def skip(view):
        raise Skip("no GPU node")
    skipped = registry.run_check(_check(skip), FakeView())
    assert (skipped["status"], skipped["message"]) == ("skipped", "skipped: no GPU node")

    def missing(view):
        raise Missing("kubernetes.pods")
    other = registry.run_check(_check(missing), FakeView())
    assert other["status"] == "other"
    assert "cannot read kubernetes.pods" in other["message"]


def test_a_check_that_raises_is_other_never_passed():
    def crash(view):
        return {}["nope"]
    result = registry.run_check(_check(crash), FakeView())
    assert result["status"] == "other"
    assert "KeyError" in result["message"]
    assert registry.exit_status([result]) == 9
    assert registry.summary([result])["ok"] is False


def test_a_fix_needs_a_role_and_variable_or_a_manual_step():
    with pytest.raises(ValueError, match="fix names a role"):
        Check("x", "preflight", "t", [], "c", dict(role="r"), lambda v: ([], []))
    with pytest.raises(ValueError, match="unknown phase"):
        Check("x", "later", "t", [], "c", dict(manual="m"), lambda v: ([], []))
    assert registry.fix_text(dict(manual="reboot")) == "reboot"


def test_duplicate_ids_are_refused():
    registry.register("t.once", "preflight", "t", [], "c", dict(manual="m"))(lambda v: ([], []))
    try:
        with pytest.raises(ValueError, match="duplicate check id t.once"):
            registry.register("t.once", "preflight", "t", [], "c", dict(manual="m"))(lambda v: ([], []))
    finally:
        registry.CHECKS[:] = [c for c in registry.CHECKS if c.id != "t.once"]


def test_counts_and_exit_status():
    results = [dict(status=s) for s in ("passed", "passed", "skipped")]
    assert registry.summary(results) == dict(tests=3, passed=2, failed=0, skipped=1, other=0, ok=True)
    assert registry.exit_status(results) == 0
    assert registry.exit_status(results + [dict(status="failed"), dict(status="other")]) == 8


def test_run_checks_refuses_unknown_phases_and_ids():
    with pytest.raises(ValueError, match="unknown phase"):
        registry.run_checks(FakeView(), phases=["soon"])
    with pytest.raises(ValueError, match="unknown check id"):
        registry.run_checks(FakeView(), checks=["no.such"])
