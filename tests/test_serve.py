"""``toolcodec serve`` over real HTTP: ops, statuses, keep-alive, metrics, readiness, drain."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.serve_process import ServeProcess

FAULTS = {"TOOLCODEC_FAULT_INJECTION": "1"}
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}, "required": ["city"]}}]


@pytest.fixture(scope="module")
def server():
    srv = ServeProcess("--workers", "2", "--timeout-ms", "2000", "--max-body", "4096",
                       env=FAULTS).start()
    yield srv
    srv.stop()


def post(server, path: str, body, **kwargs) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    return httpx.post(server.url + path, content=content, headers=headers, timeout=30,
                      **kwargs)


def samples(server) -> dict[tuple[str, tuple], float]:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.parametrize("op,payload,check", [
    ("decode", {"text": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
                        '</tool_call>', "tools": TOOLS},
     lambda r: r["calls"][0]["arguments"] == {"city": "Oslo"}),
    ("repair", {"text": "{'a': 1,}"}, lambda r: r["value"] == {"a": 1}),
    ("validate", {"name": "get_weather", "arguments": {"town": "x"}, "tools": TOOLS},
     lambda r: r["ok"] is False and r["errors"][0]["code"] == "schema_violation"),
    ("kindaxml", {"text": "a <cite>b</cite>"}, lambda r: isinstance(r, dict)),
])
def test_every_op_answers_its_envelope(server, op, payload, check) -> None:
    response = post(server, f"/v1/{op}", payload)
    assert response.status_code == 200  # status ok, even when result.ok is false
    envelope = response.json()
    assert envelope["status"] == "ok" and envelope["op"] == op and check(envelope["result"])
    # a small decode whose tools the service has seen runs in the serving process
    assert envelope["backend"] in ({"process", "inline"} if op == "decode" else {"process"})


def test_a_small_decode_runs_inline_once_its_tools_are_known(server) -> None:
    payload = {"text": 'Sure. <tool_call>{"name": "get_weather", "arguments": '
                       '{"city": "Bergen",}}</tool_call>', "tools": TOOLS}
    first = post(server, "/v1/decode", payload).json()
    answers = [first]
    end = time.monotonic() + 30
    while answers[-1]["backend"] != "inline" and time.monotonic() < end:
        answers.append(post(server, "/v1/decode", payload).json())
    assert answers[-1]["backend"] == "inline", answers[-1]
    assert {a["backend"] for a in answers} <= {"process", "inline"}
    assert all(a["result"] == first["result"] for a in answers)
    assert first["result"]["calls"][0]["arguments"] == {"city": "Bergen"}
    count = samples(server)[("toolcodec_jobs_total", (("backend", "inline"), ("op", "decode"),
                                                      ("outcome", "success")))]
    assert count >= 1
    # too big to run here: a worker's
    big = {**payload, "text": payload["text"] + " " * 3000}
    assert post(server, "/v1/decode", big).json()["backend"] == "process"


def test_batch_answers_in_order(server) -> None:
    jobs = [{"op": "repair", "payload": {"text": f"[{i},"}} for i in range(5)]
    jobs.insert(2, {"op": "nope", "payload": {}})
    out = post(server, "/v1/batch", {"jobs": jobs}).json()["results"]
    assert [o["status"] for o in out] == ["ok", "ok", "error", "ok", "ok", "ok"]
    assert [o["result"]["value"] for o in out if o["status"] == "ok"] == [[i] for i in range(5)]


@pytest.mark.parametrize("case,status,code", [
    (lambda s: post(s, "/v1/repair", b"{not json"), 400, "bad_request"),
    (lambda s: post(s, "/v1/repair", [1, 2]), 400, "bad_request"),
    (lambda s: post(s, "/v1/no_such_op", {}), 400, "bad_request"),
    (lambda s: post(s, "/v1/repair", {}), 400, "bad_request"),
    (lambda s: post(s, "/v1/repair", {"text": 5}), 400, "bad_request"),
    (lambda s: post(s, "/v1/repair", {"text": "x", "timeout_ms": -1}), 400, "bad_request"),
    (lambda s: post(s, "/v1/repair", {"text": "x" * 5000}), 413, "payload_too_large"),
    (lambda s: httpx.post(s.url + "/v1/repair", content=(b"x" for _ in range(5000)),
                          headers={"content-type": "application/json"}), 413,
     "payload_too_large"),
    (lambda s: httpx.post(s.url + "/v1/repair", content=b'{"text": "1"}',
                          headers={"content-type": "text/plain"}), 415, "bad_request"),
    (lambda s: httpx.get(s.url + "/v1/repair"), 405, "bad_request"),
    (lambda s: httpx.get(s.url + "/nowhere"), 404, "bad_request"),
    (lambda s: post(s, "/v1/_sleep", {"seconds": 2, "timeout_ms": 100}), 504, "timeout"),
    (lambda s: post(s, "/v1/_crash", {}), 503, "worker_lost"),
], ids=["not-json", "not-object", "unknown-op", "missing-field", "wrong-type", "bad-timeout",
        "too-large", "too-large-chunked", "content-type", "method", "not-found", "timeout",
        "worker-lost"])
def test_bad_input_gets_a_clear_envelope(server, case, status, code) -> None:
    response = case(server)
    assert response.status_code == status
    envelope = response.json()
    assert envelope["error"]["code"] == code and envelope["error"]["message"]


def test_a_request_may_only_lower_the_budget(server) -> None:
    out = post(server, "/v1/_sleep", {"seconds": 3, "timeout_ms": 10**9}).json()
    assert out["status"] == "timeout" and out["elapsed_ms"] < 3000


def test_keep_alive_serves_several_requests_on_one_connection(server) -> None:
    body = b'{"text": "[1,"}'
    request = (f"POST /v1/repair HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200") and orjson.loads(rest)["status"] == "ok"


def test_metrics_count_what_was_asked() -> None:
    srv = ServeProcess("--workers", "1", "--timeout-ms", "2000").start()
    try:
        for _ in range(3):
            post(srv, "/v1/repair", {"text": "[1,"})
        post(srv, "/v1/decode", {"text": "hi"})
        post(srv, "/v1/bogus_op_1", {})
        post(srv, "/v1/bogus_op_2", {})
        got = samples(srv)
        jobs = {k[1]: v for k, v in got.items() if k[0] == "toolcodec_jobs_total"}
        assert jobs[(("backend", "process"), ("op", "repair"), ("outcome", "success"))] == 3
        assert jobs[(("backend", "process"), ("op", "decode"), ("outcome", "success"))] == 1
        assert jobs[(("backend", "process"), ("op", "unknown"), ("outcome", "failure"))] == 2
        assert not any("bogus" in str(k) for k in got)  # no label value per unknown op
        http = {k[1]: v for k, v in got.items() if k[0] == "toolcodec_http_requests_total"}
        assert http[(("code", "200"), ("route", "/v1/{op}"))] == 4
        assert http[(("code", "400"), ("route", "/v1/{op}"))] == 2
        assert got[("toolcodec_http_request_duration_seconds_count",
                    (("route", "/v1/{op}"),))] == 6
        assert got[("toolcodec_workers", (("backend", "process"), ("state", "idle")))] == 1
    finally:
        srv.stop()


def test_sigterm_drains_jobs_in_flight_then_exits_0() -> None:
    srv = ServeProcess("--workers", "1", "--timeout-ms", "5000", env=FAULTS).start()
    try:
        out: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: out.append(
            post(srv, "/v1/_sleep", {"seconds": 1})))
        thread.start()
        end = time.monotonic() + 20
        while time.monotonic() < end and samples(srv).get(
                ("toolcodec_workers", (("backend", "process"), ("state", "busy")))) != 1:
            time.sleep(0.02)
        assert srv.terminate() == 0
        thread.join(20)
        assert out and out[0].status_code == 200 and out[0].json()["status"] == "ok"
        with pytest.raises(httpx.ConnectError):
            httpx.get(srv.url + "/healthz", timeout=2)
    finally:
        srv.stop()


@pytest.mark.redis
def test_readiness_follows_redis_and_workers(own_redis_server, queue_name, start_rq_worker):
    srv = ServeProcess("--backend", "rq", "--redis-url", own_redis_server.url, "--queue",
                       queue_name, "--timeout-ms", "2000").start()
    try:
        def ready() -> int:
            return httpx.get(srv.url + "/readyz", timeout=5).status_code

        assert ready() == 503  # Redis answers but no worker serves the queue
        start_rq_worker(server=own_redis_server)
        assert _eventually(lambda: ready() == 200)
        assert post(srv, "/v1/repair", {"text": "[1,"}).json()["status"] == "ok"
        own_redis_server.stop()
        assert _eventually(lambda: ready() == 503)
        body = httpx.get(srv.url + "/readyz", timeout=5).json()
        assert body["status"] == "not_ready" and "Redis" in body["reason"]
        own_redis_server.start()
        assert _eventually(lambda: ready() == 200, timeout=30)
    finally:
        srv.stop()


def _eventually(predicate, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_serve_says_where_it_listens_once_it_is_ready() -> None:
    srv = ServeProcess("--workers", "1", "--timeout-ms", "40").start()
    try:
        assert srv.proc is not None and srv.proc.stdout is not None
        line = srv.proc.stdout.readline().decode().strip()
        assert line == (f"toolcodec serve: ready on http://127.0.0.1:{srv.port} (backend process, "
                        "1 worker process, job budget 40 ms, upstream none)")
    finally:
        srv.stop()


def test_one_size_story_each_limit_a_flag() -> None:
    """max-chars: answered as the library answers (200, payload_too_large in the result);
    max-payload-chars and max-body: 413, nothing decoded, the message names the flag."""
    srv = ServeProcess("--workers", "1", "--timeout-ms", "2000", "--max-chars", "100",
                       "--max-payload-chars", "1000", "--max-body", "5000").start()
    try:
        text = "y" * 150
        r = post(srv, "/v1/decode", {"text": text})
        assert r.status_code == 200
        result = r.json()["result"]
        assert [e["code"] for e in result["errors"]] == ["payload_too_large"]
        assert result["content"] == text
        import toolcodec

        assert result == toolcodec.decode(text, limits={"max_chars": 100}).to_dict()
        r = post(srv, "/v1/decode", {"text": "y" * 2000})
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "payload_too_large"
        assert "--max-payload-chars" in r.json()["error"]["message"]
        r = post(srv, "/v1/decode", {"text": "y" * 6000})
        assert r.status_code == 413
        assert "--max-body" in r.json()["error"]["message"]
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def plain_server():
    """No fault injection: the surface a caller sees in production."""
    srv = ServeProcess("--workers", "1", "--timeout-ms", "2000").start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("op", ["decode_block", "_sleep", "nope"])
def test_only_the_callers_ops_are_reachable_and_listed(plain_server, op: str) -> None:
    r = post(plain_server, f"/v1/{op}", {"seconds": 0})
    assert r.status_code == 400
    body = r.json()
    assert body["op"] == op and body["error"]["code"] == "bad_request"
    message = body["error"]["message"]
    assert message.endswith("expected one of decode, repair, validate, kindaxml, "
                            "validate_result")
    assert "decode_block" not in message.split(";")[1] and "_sleep" not in message.split(";")[1]
    counted = samples(plain_server)
    assert counted[("toolcodec_jobs_total", (("backend", "process"), ("op", "unknown"),
                                             ("outcome", "failure")))] >= 1
    assert not any(dict(labels).get("op") in ("_sleep", "decode_block", "nope")
                   for (_, labels) in counted)


@pytest.mark.parametrize("op,payload", [
    ("decode", {"text": "x"}),
    ("repair", {"text": "x"}),
    ("validate", {"name": "get_weather", "arguments": {"city": "Oslo"}, "tools": TOOLS}),
    ("kindaxml", {"text": "x"}),
    ("validate_result", {"tool": "t", "output": "x", "schemas": {}}),
])
def test_an_unknown_field_is_refused_alike_by_every_op(plain_server, op: str,
                                                       payload: dict) -> None:
    assert post(plain_server, f"/v1/{op}", payload).status_code == 200
    r = post(plain_server, f"/v1/{op}", {**payload, "toolz": []})
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "payload.toolz"
    assert "unknown payload field(s) ['toolz']" in r.json()["error"]["message"]


def test_envelopes_of_the_http_layer_carry_the_op_and_their_time(plain_server) -> None:
    r = httpx.post(plain_server.url + "/v1/decode", content=b"{}", timeout=10,
                   headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.json()["op"] == "decode" and r.json()["elapsed_ms"] > 0
    r = post(plain_server, "/v1/repair", b"{not json")
    assert r.status_code == 400
    assert r.json()["op"] == "repair" and r.json()["elapsed_ms"] > 0


def test_routes_that_do_not_exist_without_upstream(plain_server) -> None:
    r = httpx.get(plain_server.url + "/v1/models", timeout=10)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "bad_request"
    r = httpx.get(plain_server.url + "/v1/decode", timeout=10)
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_a_tool_set_is_prepared_ahead_of_its_decodes(plain_server) -> None:
    """``POST /v1/prepare`` builds the decoder for a tool set on the workers before any decode
    needs it; the decodes then answer as before. A body without tools is refused."""
    tools = [{"name": f"prep_{i}", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}}}} for i in range(8)]
    answer = post(plain_server, "/v1/prepare", {"tools": tools})
    assert answer.status_code == 200 and answer.json() == {"prepared": True}
    out = post(plain_server, "/v1/decode", {
        "text": '<tool_call>{"name": "prep_3", "arguments": {"n": "4"}}</tool_call>',
        "tools": tools}).json()
    assert out["status"] == "ok" and out["result"]["calls"][0]["arguments"] == {"n": 4}
    for bad in ({}, {"tools": "x"}, {"tools": tools, "options": 3}, {"tools": tools, "x": 1}):
        refused = post(plain_server, "/v1/prepare", bad)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request"
