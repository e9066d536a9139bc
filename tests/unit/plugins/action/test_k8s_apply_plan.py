# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k8s_apply_plan action plugin: the reads it asks for, what it registers (its own result: the step unchanged,
which calls are in place, what was read), and that a read it cannot make puts nothing in place. Only the reads are
scripted (the Kubernetes API); the live reads run against the Kubernetes API double in tests/integration/test_role_apply.py
and the GPUDirect playbook tests. The in-place comparison itself: tests/unit/plugins/plugin_utils/_k8s/test_in_place.py."""

from __future__ import annotations

import copy
import json
import types

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gpu_ops.cluster.plugins.action import k8s_apply_plan as action

ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
NETWORK = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "vpc1"},
           "spec": {"type": "Device", "parametersRef": {"name": "vpc1"}}}
PARAMS = {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "vpc1"},
          "spec": {"vpc": "a3-gpunic-1", "vpcSubnet": "a3-gpunic-1-sub", "deviceMode": "NetDevice"}}
READY = {"type": "Ready", "status": "True"}


def _call(*objects, condition=None):
    """One call as the filter k8s_apply_batches builds it (written out here, not built by it)."""
    return {"definition": list(objects), "wait_condition": condition or {},
            "label": ", ".join("%s/%s" % (o["kind"], o["metadata"]["name"]) for o in objects)}


def _applied(desired):
    """The object as kubernetes.core's client-side apply leaves it (annotation: the manifest's JSON)."""
    live = copy.deepcopy(desired)
    live["metadata"].update(uid="u-" + desired["metadata"]["name"], resourceVersion="3")
    live["metadata"]["annotations"] = {ANNOTATION: json.dumps(desired, separators=(",", ":"), sort_keys=True)}
    return live


def _read(obj, live, ready=None):
    entry = {"query": {"api_version": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"]},
             "resources": [live] if live is not None else [], "api_found": True}
    if ready is not None:
        entry["ready"] = ready
    return entry


def test_one_named_read_per_object_in_call_order_with_the_wait_condition_when_waiting():
    calls = [_call(PARAMS), _call(NETWORK, condition=READY)]
    assert [(q["kind"], q["name"], q["wait"], q["wait_condition"]) for q in action.queries_of(calls, True)] == [
        ("GKENetworkParamSet", "vpc1", True, {}), ("Network", "vpc1", True, READY)]
    assert [q["wait"] for q in action.queries_of(calls, False)] == [False, False]
    assert action.queries_of([], False) == []


@pytest.mark.parametrize("batches", [None, "calls", [{"definition": NETWORK}], [NETWORK]])
def test_what_is_not_a_list_of_calls_is_refused_naming_the_option(batches):
    with pytest.raises(AnsibleError, match="^batches: the input must be the calls of k8s_apply_batches"):
        action.queries_of(batches, False)


def test_every_call_in_place_is_the_plans_own_result_with_what_was_read():
    calls = [_call(PARAMS, NETWORK)]
    live = [_applied(PARAMS), _applied(NETWORK)]
    reads = [_read(PARAMS, live[0]), _read(NETWORK, live[1])]
    fields = action.plan(calls, reads, False)
    assert sorted(fields) == ["batches", "in_place", "reads"]
    assert fields["in_place"] is True and fields["batches"][0]["in_place"] is True and fields["reads"] == reads
    # the call itself, and nothing of the manifest changed
    assert fields["batches"][0]["definition"] == [PARAMS, NETWORK]
    assert fields["batches"][0]["label"] == "GKENetworkParamSet/vpc1, Network/vpc1"


def test_one_call_not_in_place_leaves_the_calls_to_run_and_says_why():
    drifted = _applied(NETWORK)
    drifted["spec"]["type"] = "L3"
    fields = action.plan([_call(PARAMS), _call(NETWORK)], [_read(PARAMS, _applied(PARAMS)), _read(NETWORK, drifted)], False)
    assert fields["in_place"] is False
    assert [b["in_place"] for b in fields["batches"]] == [True, False]
    assert fields["batches"][1]["not_in_place"] == ["Network/vpc1: the live object differs at spec.type"]


def test_waiting_calls_are_in_place_only_when_ready():
    live = _applied(NETWORK)
    assert action.plan([_call(NETWORK, condition=READY)], [_read(NETWORK, live, ready=False)], True)["in_place"] is False
    fields = action.plan([_call(NETWORK, condition=READY)], [_read(NETWORK, live, ready=True)], True)
    assert fields["in_place"] is True


def test_nothing_read_puts_nothing_in_place():
    fields = action.plan([_call(NETWORK)], [], False)
    assert fields["in_place"] is False and fields["batches"][0]["not_in_place"] == ["Network/vpc1: not read"]


def test_no_call_is_in_place_with_nothing_to_send():
    assert action.plan([], [], False) == {"batches": [], "in_place": True, "reads": []}


class Reader(action.ActionModule):
    """The action with the worker's read scripted: why it cannot read, or what the read returns."""

    def __init__(self, why_not="", answer=None, auth_error=None):  # pylint: disable=super-init-not-called
        self.why_not, self.answer, self.auth_error, self.read_with = why_not, answer, auth_error, None

    def why_not_here(self, task_vars):
        return self.why_not

    def auth(self, explicit):
        if self.auth_error:
            raise AnsibleError(self.auth_error)
        return dict(explicit)

    def read_here(self, result, queries, auth, secrets):
        self.read_with = (queries, auth, secrets)
        result.update(self.answer)
        return result


def test_the_reads_are_made_in_the_worker_with_the_connection_and_its_secrets_to_scrub():
    reader = Reader(answer={"results": ["read"]})
    result = {}
    assert reader._read_all(result, ["q"], {"api_key": "sekrit"}, {}) == ["read"]
    assert result == {"in_worker": True} and reader.read_with == (["q"], {"api_key": "sekrit"}, ["sekrit"])


def test_a_worker_that_cannot_read_reads_nothing_and_says_why():
    result = {}
    assert Reader(why_not="connection ssh is not local")._read_all(result, ["q"], {}, {}) == []
    assert result == {"in_worker": False, "in_worker_reason": "connection ssh is not local"}


def test_a_read_that_fails_reads_nothing_and_keeps_its_message():
    result = {}
    reader = Reader(answer={"failed": True, "msg": "k8s_objects_info: 403 Forbidden"})
    assert reader._read_all(result, ["q"], {}, {}) == []
    assert result == {"in_worker": True, "read_error": "k8s_objects_info: 403 Forbidden"}
    assert not result.get("failed")


def test_a_kubeconfig_it_cannot_take_reads_nothing_and_leaves_the_refusal_to_kubernetes_core():
    result = {}
    reader = Reader(auth_error="kubeconfig must be a path or a dict, got int")
    assert reader._read_all(result, ["q"], {"kubeconfig": 3}, {}) == []
    assert result == {"in_worker": True, "read_error": "k8s_apply_plan: kubeconfig must be a path or a dict, got int"}
    assert reader.read_with is None and not result.get("failed")


def test_an_unreadable_step_plans_every_call_to_run():
    calls = [_call(PARAMS), _call(NETWORK)]
    fields = action.plan(calls, Reader(why_not="become is set")._read_all({}, action.queries_of(calls, False), {}, {}), False)
    assert fields["in_place"] is False and [b["in_place"] for b in fields["batches"]] == [False, False]


def test_run_refuses_an_unknown_option_and_bad_calls_before_reading(monkeypatch):
    plugin = Reader()
    plugin._task = types.SimpleNamespace(args={"batches": [_call(NETWORK)], "wiat": True})
    monkeypatch.setattr(action.reader.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    assert plugin.run(task_vars={}) == {"changed": False, "failed": True, "msg": "k8s_apply_plan: unsupported options: wiat"}
    plugin._task.args = {"batches": "Network/vpc1"}
    result = plugin.run(task_vars={})
    assert result["failed"] and result["msg"].startswith("k8s_apply_plan: batches: the input must be the calls")
    assert plugin.read_with is None


class Planner(Reader):
    """Reader that also notes the task vars it was handed."""

    def why_not_here(self, task_vars):
        self.task_vars = task_vars
        return self.why_not


def test_run_reads_the_calls_objects_and_registers_the_plan(monkeypatch):
    monkeypatch.setattr(action.reader.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    live = _applied(NETWORK)
    plugin = Planner(answer={"results": [_read(NETWORK, live)]})
    plugin._task = types.SimpleNamespace(args={"batches": [_call(NETWORK)], "context": "gpu"})
    result = plugin.run(task_vars={"inventory_hostname": "a3"})
    # no wait given: plain reads; the task's connection options reach the read; the task vars reach the worker check
    [query] = plugin.read_with[0]
    assert query["wait"] is False and query["kind"] == "Network" and plugin.read_with[1] == {"context": "gpu"}
    assert plugin.task_vars == {"inventory_hostname": "a3"}
    assert result["changed"] is False and result["in_worker"] is True and result["in_place"] is True
    assert result["reads"][0]["resources"] == [live] and "results" not in result and not result.get("failed")


def test_it_only_reads_so_it_runs_in_check_mode_and_never_in_the_background():
    assert action.ActionModule._SUPPORTS_CHECK_MODE is True and action.ActionModule._SUPPORTS_ASYNC is False
