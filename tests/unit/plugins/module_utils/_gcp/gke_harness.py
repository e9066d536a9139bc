# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the GKE tests: run a module's main() in-process against the GCP double.

Shared by the engine tests beside it (test_cluster.py, test_nodepool.py), the module-level tests
tests/unit/plugins/modules/test_gke_bad_inputs.py and test_gke_faults.py, and tests/contract/test_gke_contract.py;
its name does not start with test_, so no runner collects it as a test file.

The module runs unchanged; only AnsibleModule's exit_json/fail_json are turned into exceptions so
that the test can read the result, and the GCP session polls operations every few milliseconds
instead of every second (its poll interval is a constructor argument).
"""

from __future__ import annotations

import copy

import pytest

from ansible.module_utils import basic
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import session as _gcp
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble


PROJECT = "unit-project"
REGION = "us-central1"
ZONE = "us-central1-c"
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg") or "exit")
        self.result = result


class ModuleFail(ModuleExit):
    pass


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise ModuleFail(kwargs)


@pytest.fixture
def module_runner(monkeypatch):
    """run(main, args, check=False, diff=False) -> result dict; failures come back with failed=True."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)
    original = _gcp.GcpSession.from_module.__func__

    def fast_from_module(cls, module, **kwargs):
        kwargs.setdefault("poll_initial", 0.01)
        kwargs.setdefault("poll_max", 0.05)
        kwargs.setdefault("sleep", _short_sleep)
        return original(cls, module, **kwargs)

    monkeypatch.setattr(_gcp.GcpSession, "from_module", classmethod(fast_from_module))

    def run(main, args, check=False, diff=False):
        args = copy.deepcopy(args)
        if check:
            args["_ansible_check_mode"] = True
        if diff:
            args["_ansible_diff"] = True
        with patch_module_args(args):
            try:
                main()
            except ModuleExit as exc:
                return exc.result
        raise AssertionError("the module returned without exit_json/fail_json")

    return run


def _short_sleep(seconds):
    import time  # pylint: disable=import-outside-toplevel

    time.sleep(min(seconds, 0.05))


@pytest.fixture
def gcp():
    with GcpDouble(latency=0.05) as double:
        yield double


def mutations(double):
    return list(double.mutating_requests())


def api_call(double, method, path, body=None):
    """One authorised request to the double (for test setup, outside the code under test)."""
    import json  # pylint: disable=import-outside-toplevel
    import urllib.request  # pylint: disable=import-outside-toplevel

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(double.url + path, data=data, method=method,
                                     headers={"Authorization": "Bearer %s" % double.token,
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read().decode() or "null")


def create_cluster_directly(double, name, location=REGION, **fields):
    """A cluster in the double, created with a raw clusters.create (setup, not under test)."""
    cluster = dict(name=name, initialClusterVersion="1.32.2-gke.1489001",
                   networkConfig=dict(enableMultiNetworking=True, datapathProvider="ADVANCED_DATAPATH"),
                   ipAllocationPolicy=dict(useIpAliases=True),
                   nodePools=[dict(name="default-pool", initialNodeCount=1)])
    cluster.update(fields)
    api_call(double, "POST", "v1/projects/%s/locations/%s/clusters" % (PROJECT, location),
             dict(cluster=cluster, parent="projects/%s/locations/%s" % (PROJECT, location)))
    double.wait_idle()


def create_fabric(double, names, region=REGION):
    """GPU NIC networks + subnets straight into the double (the VPC role's job, not under test here)."""

    def call(method, path, body):
        return api_call(double, method, path, body)

    for index, name in enumerate(names):
        call("POST", "compute/v1/projects/%s/global/networks" % PROJECT,
             dict(name=name, autoCreateSubnetworks=False, mtu=8244))
    double.wait_idle()
    for index, name in enumerate(names):
        call("POST", "compute/v1/projects/%s/regions/%s/subnetworks" % (PROJECT, region),
             dict(name=name + "-sub", network="projects/%s/global/networks/%s" % (PROJECT, name),
                  ipCidrRange="192.168.%d.0/24" % index))
    double.wait_idle()
    double.clear_log()
    return [dict(network=name, subnetwork=name + "-sub") for name in names]
