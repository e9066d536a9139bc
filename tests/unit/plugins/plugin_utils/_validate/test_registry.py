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


# ----------------------------------------------------------------------------- cases the mutation check showed missing

def _fake_registry(monkeypatch):
    """Three checks in a registry of their own: two non-performance ones and a performance one, in this order."""
    checks = [Check("b.second", "deployment", "b", [], "c", dict(manual="m"), lambda v: (["b ran"], [])),
              Check("a.first", "preflight", "a", [], "c", dict(manual="m"), lambda v: (["a ran"], [])),
              Check("p.perf", "performance", "p", [], "c", dict(manual="m"), lambda v: (["p ran"], []))]
    monkeypatch.setattr(registry, "CHECKS", checks)
    return checks


def test_run_checks_leaves_performance_out_by_default_and_keeps_the_registry_order(monkeypatch):
    _fake_registry(monkeypatch)
    assert [r["id"] for r in registry.run_checks(FakeView())] == ["b.second", "a.first"]
    assert [r["id"] for r in registry.run_checks(FakeView(), phases=["performance"])] == ["p.perf"]
    assert [r["id"] for r in registry.run_checks(FakeView(), phases=["preflight", "performance"])] == ["a.first", "p.perf"]
    assert [r["id"] for r in registry.run_checks(FakeView(), checks=["a.first"])] == ["a.first"]
    assert [r["id"] for r in registry.run_checks(FakeView(), phases=["deployment"], checks=["a.first", "b.second"])] == ["b.second"]
    assert registry.run_checks(FakeView(), checks=[]) == []


def test_by_id_describe_and_register_give_back_what_they_name(monkeypatch):
    checks = _fake_registry(monkeypatch)
    assert registry.by_id("a.first") is checks[1]
    with pytest.raises(KeyError):
        registry.by_id("no.such")
    assert checks[0].describe() == dict(id="b.second", phase="deployment", title="b", reads=[], cause="c", fix="m")

    def function(view):
        return [], []
    assert registry.register("t.kept", "preflight", "t", ["host.gpus"], "c", dict(role="r", variable="r_v", manual="then m"))(
        function) is function
    assert registry.by_id("t.kept").describe()["fix"] == "role gpu_ops.cluster.r, variable r_v: then m"
    assert registry.by_id("t.kept").describe()["reads"] == ["host.gpus"]


def test_a_check_id_registered_once_is_accepted(monkeypatch):
    _fake_registry(monkeypatch)
    registry.register("t.new", "conformance", "t", [], "c", dict(manual="m"))(lambda v: ([], []))
    assert [c.id for c in registry.CHECKS] == ["b.second", "a.first", "p.perf", "t.new"]


def test_every_phase_and_a_manual_fix_alone_are_accepted():
    for phase in registry.PHASES:
        assert Check("x", phase, "t", [], "c", dict(manual="m"), lambda v: ([], [])).phase == phase
    assert Check("x", "preflight", "t", [], "c", dict(role="r", variable="v"), lambda v: ([], [])).fix == dict(role="r", variable="v")


def test_the_duration_is_in_milliseconds():
    import time

    def slow(view):
        time.sleep(0.05)
        return [], []
    duration = registry.run_check(_check(slow), FakeView())["duration_ms"]
    assert 40 <= duration < 5000, duration


def test_described_registers_a_check_with_the_description_beside_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", [])
    (tmp_path / "checks.yml").write_text(
        "t.one:\n  phase: conformance\n  title: One thing holds\n  reads: [kubernetes.nodes, gke.cluster]\n"
        "  cause: >-\n    The thing does not\n    hold.\n  fix:\n    role: r\n    variable: r_v\n    manual: then m\n")
    described = registry.described_by(str(tmp_path / "checks.py"))

    def function(view):
        return ["seen"], []
    assert described("t.one")(function) is function
    assert [c.id for c in registry.CHECKS] == ["t.one"]
    assert registry.by_id("t.one").function is function
    assert registry.by_id("t.one").describe() == dict(
        id="t.one", phase="conformance", title="One thing holds", reads=["kubernetes.nodes", "gke.cluster"],
        cause="The thing does not hold.", fix="role gpu_ops.cluster.r, variable r_v: then m")


def test_a_check_without_a_whole_description_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", [])
    (tmp_path / "checks.yml").write_text(
        "t.partial:\n  phase: preflight\n  title: t\n  reads: []\n  fix: {manual: m}\n"
        "t.extra:\n  phase: preflight\n  title: t\n  reads: []\n  cause: c\n  fix: {manual: m}\n  why: w\n"
        "t.text: just a title\n")
    described = registry.described_by(str(tmp_path / "checks.py"))
    with pytest.raises(ValueError, match="^check t.missing has no description in checks.yml$"):
        described("t.missing")
    with pytest.raises(ValueError, match="^check t.text has no description in checks.yml$"):
        described("t.text")
    with pytest.raises(ValueError, match="^check t.partial: its description in checks.yml has fix, phase, reads, title; "
                                         "a description has phase, title, reads, cause, fix \\(and optionally fixes\\)$"):
        described("t.partial")
    with pytest.raises(ValueError, match="has cause, fix, phase, reads, title, why;"):
        described("t.extra")
    assert registry.CHECKS == []


def test_an_empty_description_file_describes_no_check(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", [])
    (tmp_path / "checks.yml").write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="no description in checks.yml"):
        registry.described_by(str(tmp_path / "checks.py"))("t.any")


def _faulty(problems):
    fixes = {"missing": dict(manual="install it"), "not_ready": dict(role="q", variable="q_v", manual="read the log")}
    return Check("t.faults", "deployment", "title", [], "c.", dict(role="r", variable="r_v"), lambda v: ([], problems), fixes)


@pytest.mark.parametrize("problems, fix", [
    (["plain"], "role gpu_ops.cluster.r, variable r_v"),
    ([registry.Fault("gone", "missing")], "install it"),
    ([registry.Fault("gone", "missing"), "plain", registry.Fault("gone too", "missing")], "install it; role gpu_ops.cluster.r, variable r_v"),
    (["plain", registry.Fault("down", "not_ready")], "role gpu_ops.cluster.r, variable r_v; role gpu_ops.cluster.q, variable q_v: read the log"),
])
def test_each_fault_brings_its_own_fix_once(problems, fix):
    failed = registry.run_check(_faulty(problems), FakeView())
    assert failed["status"] == "failed"
    assert failed["fix"] == fix
    assert failed["message"] == "; ".join(problems)


def test_a_fault_naming_a_fix_the_description_lacks_is_other():
    result = registry.run_check(_faulty([registry.Fault("x", "unheard_of")]), FakeView())
    assert result["status"] == "other"
    assert "a fault names fix 'unheard_of', which its description lacks" in result["message"]


def test_the_other_fixes_are_validated_and_listed_after_the_own_one():
    with pytest.raises(ValueError, match="fix names a role"):
        Check("x", "preflight", "t", [], "c", dict(manual="m"), lambda v: ([], []), {"missing": dict(role="r")})
    described = _faulty([]).describe()["fix"]
    assert described == "role gpu_ops.cluster.r, variable r_v; missing: install it; not ready: role gpu_ops.cluster.q, variable q_v: read the log"


@pytest.mark.parametrize("raised, fix", [
    (Missing("gke.cluster"), "set validate_gke (cluster and location; the project and GCP credentials through the play's module_defaults "
                             "of group/gpu_ops.cluster.gcp, or validate_gke.project) so the GKE API is read; "),
    (Missing("mig_parted"), "give the MIG manager's mig-parted ConfigMap as validate_mig_parted_config; "),
    (Missing("health.nvbandwidth"), "do what the message names for each node (a floor for its GPU model: validate_health_nvbandwidth_floors, "
                                    "validate_health_nccl_loopback_floors; a probe that runs to the end: validate_health_timeout, "
                                    "validate_health_probe_image, the DCGM host engine) and run the health phase again (validate_phases health); "),
    (Missing("performance.nccl"), "run the performance probes again (validate_phases performance, validate_performance_probes); "),
    (Missing("kubernetes.pods"), "make the read work (the kubeconfig's API server reachable, list rights on the kind: the message "
                                 "says why it failed); "),
    (Missing("kubernetes.nodes[n1].status.nodeInfo.kernelVersion"),
     "the snapshot lacks kubernetes.nodes[n1].status.nodeInfo.kernelVersion: read the cluster again with a kubeconfig that can list it; "),
    (KeyError("nope"), "report the error with the snapshot (validate_write_snapshot); "),
])
def test_a_check_that_cannot_run_says_what_would_let_it(raised, fix):
    def fails(view):
        raise raised
    result = registry.run_check(_check(fails), FakeView())
    assert result["status"] == "other"
    assert result["fix"] == fix + "or leave t.check out of validate_checks (list the checks to run)"


def test_a_probe_record_that_was_captured_is_returned_as_it_is():
    record = {"nodes": {"gpu-0": {"rc": 0}}}
    assert registry.probe_record("health", {"dcgm": record}, "dcgm") is record


def test_a_probe_record_that_is_absent_or_failed_is_missing_and_one_not_run_is_skipped():
    with pytest.raises(Missing) as absent:
        registry.probe_record("performance", {"nccl": {}}, "ib")
    assert (absent.value.path, absent.value.why) == ("performance.ib", "no probe output was captured")
    with pytest.raises(Skip) as skipped:
        registry.probe_record("health", {"dcgm": {"skipped": "no DCGM host engine"}}, "dcgm")
    assert str(skipped.value) == "no DCGM host engine"
    with pytest.raises(Missing) as failed:
        registry.probe_record("health", {"dcgm": {"error": "pod\n  failed:   " + "x" * 400}}, "dcgm")
    assert failed.value.path == "health.dcgm"
    assert failed.value.why == "the probe could not run: " + ("pod failed: " + "x" * 400)[:300]
