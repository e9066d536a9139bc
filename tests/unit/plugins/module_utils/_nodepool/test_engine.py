# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared shape of the node-pool engines (_nodepool.NodePoolEngine) and the resulting-document rule.

The flow is exercised through a minimal engine over an in-memory pool store (the GKE and AKS
engines are tested against their cloud doubles in tests/unit/plugins/module_utils/_gcp/test_nodepool.py and
module_utils/_azure/test_nodepool.py).
"""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as _aks_nodepool
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool as _gke_nodepool
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool import engine as _nodepool
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError, run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import resulting_document
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError

SPEC = dict(name=dict(type="str", required=True), size=dict(type="int"), zone=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]))


class Store:
    """A pool store that refuses writes to an unknown zone and records every call."""

    def __init__(self, zones=("z1",)):
        self.pools = {}
        self.zones = set(zones)
        self.calls = []
        self.render = False


class StoreEngine(_nodepool.NodePoolEngine):
    PROVIDER = "store"
    API = "Store"

    @staticmethod
    def validate(params):
        problems = Problems()
        if params.get("size") is not None and params["size"] < 0:
            problems.add("size", "must be 0 or more")
        return problems

    @classmethod
    def open_session(cls, context, **options):
        return options["store"]

    def read(self):
        self.session.calls.append("read")
        return self.session.pools.get(self.params["name"])

    def plan_present(self, current):
        self.session.calls.append("plan")
        want = dict(name=self.params["name"], size=self.params["size"], zone=self.params["zone"])
        if current is None:
            self.plan.create("pool", want["name"], after=want, request=want)
        elif current != want:
            self.plan.update("pool", want["name"], before=current, after=want, fields=["size"], request=want)

    def plan_absent(self, current):
        self.session.calls.append("plan")
        if current is not None:
            self.plan.delete("pool", self.params["name"], before=current)

    def preflight(self):
        self.session.calls.append("preflight")
        zone = self.params.get("zone")
        if self.plan.changed and zone is not None and zone not in self.session.zones:
            raise _nodepool.PoolError("zone: %s does not exist" % zone)

    def apply(self):
        for change in self.plan.changes:
            self.session.calls.append("apply:%s" % change.action)
            if change.action == "delete":
                self.session.pools.pop(change.name)
            else:
                self.session.pools[change.name] = dict(change.request, status="RUNNING")

    def desired_document(self):
        return self.plan.changes[-1].request

    @staticmethod
    def expected_resources(params, pool=None):
        return {"nvidia.com/gpu": (pool or params)["size"]} if (pool or params).get("size") else None


def run(store, check=False, **options):
    args = dict(options)
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
        with pytest.raises(SystemExit):
            run_module(module, lambda params, context: _nodepool.run(params, context, StoreEngine, store=store))


@pytest.fixture
def result(capsys):
    return lambda: json.loads(capsys.readouterr().out)


def test_the_flow_reads_plans_checks_then_applies_and_returns_the_read_back_pool(result):
    store = Store()
    run(store, name="gpu", size=2, zone="z1")
    got = result()
    assert store.calls == ["read", "plan", "preflight", "apply:create", "read"]
    assert got["changed"] and got["changes"] == [{"action": "create", "kind": "pool", "name": "gpu"}]
    assert got["node_pool"] == {"name": "gpu", "size": 2, "zone": "z1", "status": "RUNNING"}
    assert got["expected_resources"] == {"nvidia.com/gpu": 2}


def test_preflight_runs_in_check_mode_and_its_error_stops_before_any_write(result):
    store = Store()
    run(store, check=True, name="gpu", size=2, zone="z9")
    got = result()
    assert got["failed"] and got["msg"] == "zone: z9 does not exist"
    assert got["changes"] == [{"action": "create", "kind": "pool", "name": "gpu"}]
    assert store.calls == ["read", "plan", "preflight"]
    run(store, name="gpu", size=2, zone="z9")
    assert result()["failed"]
    assert store.pools == {}


def test_input_problems_fail_before_the_session_is_used(result):
    store = Store()
    run(store, name="gpu", size=-1)
    got = result()
    assert got["failed"] and got["problems"] == ["size: must be 0 or more"]
    assert "gpu_nodepool (provider store)" in got["msg"]
    assert store.calls == []


def test_check_mode_returns_the_current_pool_and_absent_returns_nothing(result):
    store = Store()
    store.pools["gpu"] = dict(name="gpu", size=1, zone="z1")
    run(store, check=True, name="gpu", size=4, zone="z1")
    got = result()
    assert got["changed"] and got["node_pool"] == {"name": "gpu", "size": 1, "zone": "z1"}
    assert got["expected_resources"] == {"nvidia.com/gpu": 1}  # the pool as it is, in check mode
    run(store, name="gpu", state="absent")
    got = result()
    assert got["changed"] and got["node_pool"] == {} and "expected_resources" not in got
    assert store.pools == {}


@pytest.mark.parametrize("state, check_mode, changed, render, answered, read, expected", [
    ("absent", True, True, False, None, "read", "current"),
    ("absent", False, True, False, None, "read", None),
    ("present", True, True, False, "answered", "read", "current"),
    ("present", False, False, False, "answered", "read", "current"),
    ("present", False, True, False, "answered", "read", "answered"),
    ("present", False, True, False, None, "read", "read"),
    ("present", False, True, False, None, None, "desired"),
    ("present", False, True, True, None, "read", "desired"),  # render mode reads nothing
    ("present", False, True, True, "answered", "read", "answered"),
])
def test_resulting_document_rule(state, check_mode, changed, render, answered, read, expected):
    reads = []

    def read_back():
        reads.append(1)
        return read

    got = resulting_document(state, check_mode, changed, "current", render, read_back, lambda: "desired", answered)
    assert got == expected
    assert bool(reads) == (expected in ("read", "desired") and not render and answered is None)


@pytest.mark.parametrize("engine", [_gke_nodepool, _aks_nodepool])
def test_both_engines_have_the_one_shape(engine):
    assert issubclass(engine.PoolEngine, _nodepool.NodePoolEngine)
    assert engine.PoolError is _nodepool.PoolError
    assert engine.PoolEngine.validate is engine.validate
    assert engine.PoolEngine.expected_resources is engine.expected_resources
    assert engine.expected_resources({}, None) is None


def test_an_info_read_refuses_its_problems_before_reading_and_names_an_api_error():
    reads = []
    problems = Problems()
    problems.add("cluster", "must be 1 to 40 characters")
    with pytest.raises(EngineError) as caught:
        _nodepool.run_info(problems, lambda: reads.append("read"))
    assert reads == [] and "cluster: must be 1 to 40 characters" in caught.value.msg

    def refused():
        raise ApiError(403, "permission denied", "GET", "https://container.example/v1/projects/p")

    with pytest.raises(EngineError) as caught:
        _nodepool.run_info(Problems(), refused)
    assert caught.value.msg.startswith("request failed: HTTP 403 GET") and caught.value.details["status"] == 403
    assert _nodepool.run_info(Problems(), lambda: ([{"name": "a"}], True)) == dict(
        changed=False, cluster_exists=True, node_pools=[{"name": "a"}])
