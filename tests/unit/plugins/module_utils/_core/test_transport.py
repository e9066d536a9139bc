# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared HTTP layer against a real local HTTP server that answers from a script."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, quote_plus

import pytest
import requests

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import (
    installed,
    ApiError,
    CredentialsError,
    HttpClient,
    RenderLog,
    RenderSession,
    RetryPolicy,
    Secrets,
    clean_credential,
    parse_retry_after,
    scrub,
    scrub_value,
)


class ScriptedServer:
    """Answers each request with the next scripted reply: (status, headers, body) or "reset"."""

    def __init__(self):
        self.script = []
        self.seen = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                server.seen.append((self.command, self.path, body, self.headers.get("Authorization")))
                reply = server.script.pop(0) if server.script else (200, {}, {"ok": True})
                if reply == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.close()
                    return
                status, headers, payload = reply
                data = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _reply

            def log_message(self, *args):  # keep test output quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    scripted = ScriptedServer()
    yield scripted
    scripted.close()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def client(sleeps):
    session = requests.Session()
    session.headers["Authorization"] = "Bearer very-secret-token"
    policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=8.0, sleep=sleeps.append, rng=lambda: 1.0)
    return HttpClient(session, retry=policy, timeout=5)


def test_success_returns_decoded_body(server, client):
    server.script = [(200, {}, {"name": "vpc1"})]
    assert client.request("GET", server.url + "/x").body == {"name": "vpc1"}


def test_429_and_503_are_retried_with_growing_backoff(server, client, sleeps):
    server.script = [(429, {}, {}), (503, {}, {}), (200, {}, {"ok": 1})]
    assert client.request("POST", server.url + "/x", body={"a": 1}).body == {"ok": 1}
    assert sleeps == [1.0, 2.0]
    assert [s[2] for s in server.seen] == [{"a": 1}] * 3


def test_retry_after_is_a_floor(server, client, sleeps):
    server.script = [(429, {"Retry-After": "5"}, {}), (200, {}, {})]
    client.request("GET", server.url + "/x")
    assert sleeps == [5.0]


def test_connection_reset_is_retried(server, client, sleeps):
    server.script = ["reset", (200, {}, {"ok": 1})]
    assert client.request("GET", server.url + "/x").body == {"ok": 1}
    assert len(sleeps) == 1


def test_gives_up_after_max_retries_with_the_api_message(server, client, sleeps):
    server.script = [(503, {}, {"error": {"code": 503, "message": "backend unavailable"}})] * 4
    with pytest.raises(ApiError) as caught:
        client.request("GET", server.url + "/x")
    assert caught.value.status == 503
    assert "backend unavailable" in str(caught.value)
    assert len(sleeps) == 3


def test_client_errors_are_not_retried_and_carry_no_credentials(server, client, sleeps):
    server.script = [(400, {}, {"error": {"code": 400, "message": "Invalid value for field 'resource.mtu'"}})]
    with pytest.raises(ApiError) as caught:
        client.request("POST", server.url + "/networks", body={"mtu": 1})
    assert sleeps == []
    assert "resource.mtu" in str(caught.value)
    assert "very-secret-token" not in str(caught.value)
    assert server.seen[0][3] == "Bearer very-secret-token"


def test_get_maps_404_to_none(server, client):
    server.script = [(404, {}, {"error": {"code": 404, "message": "not found"}})]
    assert client.get(server.url + "/missing") is None


def test_unreachable_endpoint_reports_no_answer(client):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(ApiError, match="no answer after 4 attempts"):
        client.request("GET", "http://127.0.0.1:%d/x" % port)


@pytest.mark.parametrize("value, expected", [("7", 7.0), (None, None), ("Wed, 21 Oct 2026 07:28:00 GMT", None), ("-3", 0.0)])
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value) == expected


def test_backoff_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=4.0, rng=lambda: 1.0)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 4.0, 4.0]


def test_render_session_records_writes_in_order_and_reads_find_nothing(tmp_path):
    responses = []

    def responder(method, url, body):
        responses.append((method, url))
        return {"status": "DONE"}

    client = HttpClient(RenderSession(str(tmp_path), "gcp", responder), retry=RetryPolicy(max_retries=0))
    assert client.get("https://compute.example/compute/v1/projects/p/global/networks/vpc1") is None
    client.request("POST", "https://compute.example/compute/v1/projects/p/global/networks", body={"name": "vpc1"})
    client.request("DELETE", "https://compute.example/compute/v1/projects/p/global/firewalls/fw1")
    names = sorted(os.listdir(tmp_path / "requests"))
    assert names == ["001-gcp-post-global_networks.json", "002-gcp-delete-firewalls_fw1.json"]
    first = json.loads((tmp_path / "requests" / names[0]).read_text())
    assert first == {"api": "gcp", "method": "POST", "body": {"name": "vpc1"},
                     "url": "https://compute.example/compute/v1/projects/p/global/networks"}
    assert responses == [("POST", "https://compute.example/compute/v1/projects/p/global/networks"),
                         ("DELETE", "https://compute.example/compute/v1/projects/p/global/firewalls/fw1")]


def test_render_numbering_continues_across_runs(tmp_path):
    for dummy in range(2):
        session = RenderSession(str(tmp_path), "arm", lambda m, u, b: {})
        HttpClient(session).request("PUT", "https://arm.example/subscriptions/s/x", body={})
    assert sorted(os.listdir(tmp_path / "requests")) == ["001-arm-put-s_x.json", "002-arm-put-s_x.json"]


def _record_many(render_dir, start, count):
    start.wait()
    for dummy in range(count):
        RenderLog(render_dir).record("arm", "PUT", "https://arm.example/subscriptions/s/agentPools/migpool", {})


def test_render_numbering_is_unique_across_parallel_processes(tmp_path):
    """Ansible renders several inventory hosts at once, one worker process each: no number twice, no file lost."""
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = [context.Process(target=_record_many, args=(str(tmp_path), start, 25)) for dummy in range(6)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    names = sorted(os.listdir(tmp_path / "requests"))
    assert names == ["%03d-arm-put-agentPools_migpool.json" % index for index in range(1, 151)]


# ---------------------------------------------------------------- credentials: checked, then scrubbed everywhere


@pytest.mark.parametrize("value, cleaned", [
    ("ya29.a0Af-token_value~x\n", "ya29.a0Af-token_value~x"),
    ("  ya29.token==\r\n", "ya29.token=="),
    ("", None),
    (None, None),
])
def test_clean_credential_strips_surrounding_white_space(value, cleaned):
    assert clean_credential("access_token", value, token=True) == cleaned


@pytest.mark.parametrize("value", ["ya29.abc\ndef", "ya29.abc\r\ndef", "tok\x00en", "tok\ten", "tok\x85en"])
def test_clean_credential_refuses_controls_inside_naming_the_option_not_the_value(value):
    with pytest.raises(CredentialsError) as caught:
        clean_credential("client_secret", value)
    assert caught.value.option == "client_secret" and str(caught.value).startswith("client_secret")
    assert "abc" not in str(caught.value) and "tok" not in str(caught.value)


@pytest.mark.parametrize("value", ["ya29.has space", "ya29.quote\"d", "ya29.n\u00e9", "   "])
def test_a_bearer_token_holds_token68_only(value):
    with pytest.raises(CredentialsError, match="^access_token"):
        clean_credential("access_token", value, token=True)


def test_scrub_masks_every_form_of_a_secret():
    secret = "s3cr3t/val+ue=\n"
    raw = secret.encode()
    text = " | ".join([secret, repr(secret), json.dumps(secret), base64.b64encode(raw).decode(),
                       base64.urlsafe_b64encode(raw).decode().rstrip("="), quote(secret, safe=""), quote_plus(secret),
                       base64.b64encode(secret.strip().encode()).decode(), "Bearer other-token-123"])
    scrubbed = scrub(text, [secret])
    assert "s3cr3t" not in scrubbed and "czNjcjN0" not in scrubbed and "other-token-123" not in scrubbed
    assert scrubbed.count("********") >= 9


def test_secrets_feed_a_sink_and_scrub_values():
    sink = set()
    secrets = Secrets(["first-secret"], sink=sink)
    secrets.add("token-obtained-later")
    assert {"first-secret", "token-obtained-later", base64.b64encode(b"first-secret").decode()} <= sink
    assert scrub_value({"a": ["x first-secret", {"token-obtained-later": 1}]}, secrets) == \
        {"a": ["x ********", {"********": 1}]}


def test_api_errors_are_scrubbed_and_401_carries_the_hint(server):
    secret = "very-secret-token"
    echoed = base64.b64encode(secret.encode()).decode()
    server.script.append((401, {}, {"error": {"message": "bad token %s (%s)" % (echoed, quote_plus(secret))}}))
    session = requests.Session()
    http = HttpClient(session, retry=RetryPolicy(max_retries=0), secrets=Secrets([secret]),
                      unauthorized_hint="the token has expired")
    with pytest.raises(ApiError) as caught:
        http.request("GET", server.url + "/x")
    assert echoed not in str(caught.value) and secret not in json.dumps(caught.value.body)
    assert str(caught.value).endswith("; the token has expired")


def test_a_library_error_quoting_the_header_is_scrubbed(server):
    session = requests.Session()
    session.headers["Authorization"] = "Bearer tok-abc-123\n"
    http = HttpClient(session, retry=RetryPolicy(max_retries=0), secrets=Secrets(["tok-abc-123\n"]))
    with pytest.raises(ApiError) as caught:
        http.request("GET", server.url + "/x")
    assert "tok-abc-123" not in str(caught.value) and "InvalidHeader" in str(caught.value)


@pytest.mark.parametrize("name, present", [("json", True), ("gpu_ops_no_such_library", False),
                                           ("gpu_ops_no_such_package.sub", False)])
def test_installed_says_whether_a_library_is_there_without_importing_it(name, present):
    found, error = installed(name)
    assert found is present
    if present:
        assert error is None
    else:
        assert isinstance(error, ImportError) and name in str(error)
        assert name not in sys.modules
