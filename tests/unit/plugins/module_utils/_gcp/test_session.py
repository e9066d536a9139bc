# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GcpSession against the GCP double: retries, waiters, concurrency, render mode, secrets."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_COMMON_SPEC
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import (
    GcpSession,
    OperationError,
    OperationTimeoutError,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

PROJECT = "unit-project"
CLUSTERS = "projects/%s/locations/us-central1/clusters" % PROJECT


@pytest.fixture
def double():
    with GcpDouble(latency=0.0) as gcp:
        yield gcp


class Sleeps:
    """A fake sleep that records what it was asked to wait."""

    def __init__(self):
        self.calls = []

    def __call__(self, seconds):
        self.calls.append(seconds)


def session(double, **kwargs):
    args = double.module_args(project=PROJECT)
    args.setdefault("sleep", Sleeps())
    args.setdefault("poll_initial", 0.02)
    args.update(kwargs)
    return GcpSession(**args)


def network(name, mtu=8244):
    return {"name": name, "autoCreateSubnetworks": False, "mtu": mtu}


def create_network(gcp, name):
    return gcp.wait_compute_operation(gcp.post(gcp.compute_url("global/networks"), network(name)))


# ---------------------------------------------------------------- retries


def test_429_is_retried_and_retry_after_is_a_floor(double):
    sleeps = Sleeps()
    gcp = session(double, sleep=sleeps)
    double.inject("429", method="POST", path="/global/networks$", count=2, retry_after=7)
    op = gcp.post(gcp.compute_url("global/networks"), network("n1"))
    assert op["kind"] == "compute#operation"
    assert len(sleeps.calls) == 2
    assert all(delay >= 7 for delay in sleeps.calls)
    assert [r["status"] for r in double.requests] == [429, 429, 200]


def test_503_and_reset_are_retried_with_backoff(double):
    sleeps = Sleeps()
    gcp = session(double, sleep=sleeps)
    create_network(gcp, "n1")
    double.clear_log()
    double.inject("503", method="GET", count=3)
    double.inject("reset", method="GET", count=1, skip=3)
    assert gcp.get(gcp.compute_url("global/networks/n1"))["mtu"] == 8244
    assert [r["status"] for r in double.requests] == [503, 503, 503, "reset", 200]
    assert len(sleeps.calls) == 4
    # full-jitter exponential: each delay is below base * 2**attempt
    assert all(0 <= delay <= 2 ** attempt for attempt, delay in enumerate(sleeps.calls))


def test_gives_up_after_max_retries_with_a_clear_error(double):
    gcp = session(double, max_retries=2)
    double.inject("503", count=10)
    with pytest.raises(ApiError) as caught:
        gcp.get(gcp.compute_url("global/networks/n1"))
    assert caught.value.status == 503
    assert "GET %s" % gcp.compute_url("global/networks/n1") in str(caught.value)
    assert len(double.requests) == 3


def test_connection_resets_exhaust_retries(double):
    gcp = session(double, max_retries=1)
    double.inject("reset", count=5)
    with pytest.raises(ApiError) as caught:
        gcp.get(gcp.compute_url("global/networks/n1"))
    assert caught.value.status is None
    assert "no answer after 2 attempts" in str(caught.value)


def test_404_read_is_none_and_400_is_not_retried(double):
    gcp = session(double)
    assert gcp.get(gcp.compute_url("global/networks/missing")) is None
    with pytest.raises(ApiError) as caught:
        gcp.post(gcp.compute_url("global/networks"), network("n1", mtu=9001))
    assert caught.value.status == 400
    assert "resource.mtu" in str(caught.value)
    assert len(double.mutating_requests()) == 1


# ---------------------------------------------------------------- operation waiters


def test_compute_waiter_uses_wait_for_global_and_regional_operations(double):
    double.set_latency(0.2)
    gcp = session(double)
    done = create_network(gcp, "n1")
    assert done["status"] == "DONE"
    body = {"name": "s1", "network": "global/networks/n1", "ipCidrRange": "192.168.0.0/24"}
    op = gcp.post(gcp.compute_url("regions/us-central1/subnetworks"), body)
    assert "/regions/us-central1/operations/" in op["selfLink"]
    assert gcp.wait_compute_operation(op)["status"] == "DONE"
    waits = [r["path"] for r in double.requests if r["path"].endswith("/wait")]
    assert len(waits) == 2
    assert "/global/operations/" in waits[0] and "/regions/us-central1/operations/" in waits[1]
    assert not [r for r in double.requests if r["method"] == "GET" and "/operations/" in r["path"]]
    assert gcp.get(gcp.compute_url("regions/us-central1/subnetworks/s1"))["ipCidrRange"] == "192.168.0.0/24"


def test_compute_waiter_from_name_and_region_without_self_link(double):
    gcp = session(double)
    op = gcp.post(gcp.compute_url("global/networks"), network("n1"))
    assert gcp.wait_compute_operation({"name": op["name"], "status": "RUNNING"})["status"] == "DONE"


def test_compute_operation_error_names_operation_and_code(double):
    gcp = session(double)
    double.inject("op_error", method="POST", path="/global/networks$", message="Quota 'NETWORKS' exceeded")
    op = gcp.post(gcp.compute_url("global/networks"), network("n1"))
    with pytest.raises(OperationError) as caught:
        gcp.wait_compute_operation(op)
    text = str(caught.value)
    assert op["name"] in text and "Quota 'NETWORKS' exceeded" in text and "insert" in text
    assert isinstance(caught.value, ApiError)
    assert caught.value.status == 400
    assert gcp.get(gcp.compute_url("global/networks/n1")) is None


def test_compute_operation_timeout(double):
    double.wait_max = 0.1
    double.set_latency(5)
    gcp = session(double)
    op = gcp.post(gcp.compute_url("global/networks"), network("n1"))
    started = time.monotonic()
    with pytest.raises(OperationTimeoutError) as caught:
        gcp.wait_compute_operation(op, timeout=0.35)
    # gave up long before the 5 s operation finished (a wide margin: the CI machine may be loaded)
    assert time.monotonic() - started < 4
    assert op["name"] in str(caught.value) and "0.35" in str(caught.value)


def test_container_waiter_polls_until_done(double):
    double.set_latency(0.2)
    gcp = session(double, sleep=time.sleep)
    op = gcp.post(gcp.container_url(CLUSTERS), {"cluster": {"name": "c1", "initialNodeCount": 1}})
    assert op["status"] == "RUNNING" and "/" not in op["name"]
    assert gcp.get(gcp.container_url(CLUSTERS + "/c1"))["status"] == "PROVISIONING"
    done = gcp.wait_container_operation(op)
    assert done["status"] == "DONE" and done["operationType"] == "CREATE_CLUSTER"
    assert gcp.get(gcp.container_url(CLUSTERS + "/c1"))["status"] == "RUNNING"
    polls = [r["path"] for r in double.requests if "/operations/" in r["path"]]
    assert polls and all(p.endswith("/locations/us-central1/operations/%s" % op["name"]) for p in polls)


def test_container_waiter_timeout_and_error(double):
    double.set_latency(5)
    gcp = session(double, sleep=time.sleep)
    op = gcp.post(gcp.container_url(CLUSTERS), {"cluster": {"name": "c1", "initialNodeCount": 1}})
    with pytest.raises(OperationTimeoutError) as caught:
        gcp.wait_container_operation(op, timeout=0.2)
    assert op["name"] in str(caught.value) and "CREATE_CLUSTER" in str(caught.value)

    double.set_latency(0.05)
    double.inject("op_error", path="clusters$", message="Insufficient regional quota")
    op = gcp.post(gcp.container_url(CLUSTERS, beta=True), {"cluster": {"name": "c2", "initialNodeCount": 1}})
    with pytest.raises(OperationError) as caught:
        gcp.wait_container_operation(op)
    assert op["name"] in str(caught.value) and "Insufficient regional quota" in str(caught.value)


# ---------------------------------------------------------------- concurrency


def test_run_concurrently_overlaps_operations(double):
    """All eight creates are in flight at once: each waits at a barrier for the seven others (run one
    after the other, the first would wait alone and break the barrier), then waits for its operation."""
    double.set_latency(0.2)
    gcp = session(double)
    names = ["n%d" % i for i in range(8)]
    barrier = threading.Barrier(len(names), timeout=60)

    def create(name):
        barrier.wait()
        return create_network(gcp, name)

    results = gcp.run_concurrently([lambda n=n: create(n) for n in names])
    assert [r["targetLink"].rsplit("/", 1)[-1] for r in results] == names
    assert len(double.state(PROJECT)["networks"]) == 8


def test_run_concurrently_collects_errors_after_all_tasks_finished(double):
    double.set_latency(0.2)
    gcp = session(double)
    create_network(gcp, "taken")

    def failing(message):
        raise ValueError(message)

    tasks = [lambda: create_network(gcp, "a"), lambda: failing("first"), lambda: create_network(gcp, "taken"),
             lambda: create_network(gcp, "b")]
    with pytest.raises(ValueError) as caught:
        gcp.run_concurrently(tasks)
    assert str(caught.value) == "first"
    assert len(caught.value.others) == 1 and caught.value.others[0].status == 409
    assert sorted(n["name"] for n in double.state(PROJECT)["networks"]) == ["a", "b", "taken"]


# ---------------------------------------------------------------- render mode, endpoints, secrets


def test_render_mode_records_requests_and_sends_nothing(double, tmp_path):
    gcp = GcpSession(PROJECT, auth_kind="serviceaccount", service_account_file=str(tmp_path / "missing.json"),
                     render_dir=str(tmp_path), compute_endpoint=double.url, container_endpoint=double.url)
    assert gcp.render
    assert gcp.get(gcp.compute_url("global/networks/n1")) is None
    ops = gcp.run_concurrently([lambda i=i: gcp.post(gcp.compute_url("global/networks"), network("n%d" % i))
                                for i in range(3)])
    assert [gcp.wait_compute_operation(op)["status"] for op in ops] == ["DONE"] * 3
    op = gcp.post(gcp.container_url(CLUSTERS), {"cluster": {"name": "c1"}})
    assert op["operationType"] == "CREATE_CLUSTER"
    assert gcp.wait_container_operation(op)["status"] == "DONE"
    files = sorted(os.listdir(tmp_path / "requests"))
    assert [f[:3] for f in files] == ["001", "002", "003", "004"]
    recorded = [json.loads((tmp_path / "requests" / f).read_text()) for f in files]
    assert [r["body"].get("name") for r in recorded[:3]] == ["n0", "n1", "n2"]
    assert recorded[3]["method"] == "POST" and recorded[3]["url"].endswith("/clusters")
    assert double.requests == []


def test_endpoint_override_and_links():
    gcp = GcpSession(PROJECT, auth_kind="accesstoken", access_token="t0k3n-value",
                     container_endpoint="http://10.1.2.3:8080/gke", compute_endpoint="http://10.1.2.3:8081")
    assert gcp.container_url("projects/p/locations/l/clusters/c") == \
        "http://10.1.2.3:8080/gke/v1/projects/p/locations/l/clusters/c"
    assert gcp.container_url("projects/p/locations/l/clusters/c", beta=True).startswith("http://10.1.2.3:8080/gke/v1beta1/")
    assert gcp.compute_url("global/networks/n") == \
        "http://10.1.2.3:8081/compute/v1/projects/%s/global/networks/n" % PROJECT
    assert gcp.compute_link("https://www.googleapis.com/compute/v1/projects/x/regions/r/subnetworks/s") == \
        "http://10.1.2.3:8081/compute/v1/projects/x/regions/r/subnetworks/s"


def test_no_token_in_errors_or_logs(double):
    secret = "ya29.super-secret-token-value"
    messages = []
    gcp = session(double, access_token=secret, log=messages.append, max_retries=1)
    with pytest.raises(ApiError) as caught:
        gcp.get(gcp.compute_url("global/networks/n1"))
    assert caught.value.status == 401
    double.inject("503", count=5)
    with pytest.raises(ApiError) as caught_503:
        gcp.get(gcp.compute_url("global/networks/n1"))
    texts = [str(caught.value), repr(caught.value), str(caught_503.value), str(caught.value.body)] + messages
    assert messages, "retries should have been logged"
    assert not [t for t in texts if secret in t or "Bearer" in t]


def test_bad_service_account_contents_never_echo_the_key():
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
    spec = {"type": "service_account", "private_key": key, "client_email": "sa@p.iam.gserviceaccount.com"}
    with pytest.raises(Exception) as caught:
        GcpSession(PROJECT, auth_kind="serviceaccount", service_account_contents=spec)
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in str(caught.value)
    assert "serviceaccount" in str(caught.value)


def _module(args, capsys):
    with patch_module_args(args):
        module = AnsibleModule(argument_spec=GCP_COMMON_SPEC)
        with pytest.raises(SystemExit):
            run_module(module, lambda params, context: dict(session=repr(context.session(GcpSession))))
    return json.loads(capsys.readouterr().out)


def test_from_module_fails_cleanly(capsys):
    result = _module({"project": PROJECT, "auth_kind": "accesstoken"}, capsys)
    assert result["failed"] and "access_token" in result["msg"]
    result = _module({"project": PROJECT, "auth_kind": "serviceaccount"}, capsys)
    assert "service_account_file or service_account_contents" in result["msg"]
    result = _module({"project": PROJECT, "max_retries": -1, "access_token": "long-token-value", "auth_kind": "accesstoken"}, capsys)
    assert "max_retries" in result["msg"]


def test_from_module_builds_a_working_session(double):
    with patch_module_args(double.module_args(project=PROJECT, max_retries=3)):
        module = AnsibleModule(argument_spec=GCP_COMMON_SPEC)
        gcp = GcpSession.from_module(module, sleep=Sleeps())
    assert gcp.project == PROJECT and not gcp.render and gcp.http.retry.max_retries == 3
    create_network(gcp, "n1")
    assert gcp.get(gcp.compute_url("global/networks/n1"))["name"] == "n1"


def test_double_serves_on_loopback():
    # (how fast it starts is a benchmark matter, not a test's)
    with GcpDouble() as gcp:
        assert gcp.url.startswith("http://127.0.0.1:")


def test_read_once_sends_one_read_per_url_even_when_concurrent(double):
    gcp = session(double)
    url = gcp.compute_url("regions/us-central1")
    answers = gcp.run_concurrently([lambda: gcp.read_once(url) for dummy in range(6)], max_workers=6)
    assert all(a["name"] == "us-central1" for a in answers)
    assert gcp.read_once(gcp.compute_url("regions/us-central9")) is None
    assert gcp.read_once(gcp.compute_url("regions/us-central9")) is None
    assert double.read_counts() == {"/compute/v1/projects/%s/regions/us-central1" % PROJECT: 1,
                                    "/compute/v1/projects/%s/regions/us-central9" % PROJECT: 1}
