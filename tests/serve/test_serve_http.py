"""The HTTP layer of solbench serve against hostile and heavy clients, in process: a real
:class:`~solbench.serve.service.Service` (no lane started, so no worker) behind the real app on
uvicorn, on loopback. A job is put in the service's table as a queued job that never runs, so
a long-poll on it holds its request for the whole ``wait``."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from solbench.serve.app import make_server  # noqa: E402
from solbench.serve.service import Job, Service  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
#: the head timeout the server under test runs with (s)
HEAD_TIMEOUT_S = 2.0


@pytest.fixture
def served(tmp_path):
    """(host, port, service, a queued job that never runs)."""
    from solbench.spec import load_problem, reference_solution
    from solbench.suites import resolve_problem

    service = Service([tmp_path], "cpu", spares=0)
    prob = load_problem(resolve_problem("l1/relu_fp32"))
    from solbench.serve.api import EvalRequest

    job = Job(id="00000000deadbeef", client="B", req=EvalRequest(problem="l1/relu_fp32"), problem=prob,
              problem_key=("x",), solution=reference_solution(prob), device="cpu")
    service.jobs[job.id] = job
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = make_server(service, TOKEN, head_timeout_s=HEAD_TIMEOUT_S)
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    t0 = time.monotonic()
    while not server.started and time.monotonic() - t0 < 30:
        time.sleep(0.02)
    try:
        yield "127.0.0.1", port, service, job
    finally:
        job._set(state="cancelled")  # wakes any long-poll still held
        server.should_exit = True
        th.join(timeout=30)
        service.close()


def _req(host, port, method, path, token=TOKEN, body=None, timeout=60.0):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def test_long_polls_do_not_starve_other_requests(served):
    """60 clients long-polling a job that does not change (as 60 `solbench eval --server`
    followers do) must not hold the other routes: before, each poll held one of the 40 threads
    of the shared pool for its whole wait, so a health check waited for the polls to end."""
    host, port, _, job = served
    wait_s = 10.0
    got: list[int] = []

    def poll():
        got.append(_req(host, port, "GET", f"/v1/jobs/{job.id}?wait={wait_s}")[0])

    polls = [threading.Thread(target=poll, daemon=True) for _ in range(60)]
    for t in polls:
        t.start()
    time.sleep(1.5)  # every poll is in and waiting
    t0 = time.monotonic()
    status, body = _req(host, port, "GET", "/v1/health")
    health_s = time.monotonic() - t0
    status2, _ = _req(host, port, "GET", f"/v1/jobs/{job.id}")  # a plain GET too
    other_s = time.monotonic() - t0
    assert status == 200 and body["ok"] is True and status2 == 200
    # the polls hold for wait_s - 1.5 s more; an answer well before that was not queued behind them
    assert health_s < 4.0 and other_s < 4.0, (health_s, other_s)
    job._set(state="cancelled")  # a change ends every poll at once
    for t in polls:
        t.join(timeout=30)
    assert got == [200] * 60


def test_every_error_is_one_json_line_and_the_schema_needs_the_token(served):
    """docs/serve.md: every error is {"error": "<one line>"}, a bad field 400; before, a bad
    query parameter came back 422 with FastAPI's {"detail": [...]}, an unknown route or method
    {"detail": ...}, and /openapi.json answered without a token."""
    host, port, _, job = served
    code, body = _req(host, port, "GET", f"/v1/jobs/{job.id}?after=xyz")
    assert code == 400 and set(body) == {"error"} and "after" in body["error"]
    assert "\n" not in body["error"]
    code, body = _req(host, port, "PUT", "/v1/jobs", body=b"{}")
    assert code == 405 and set(body) == {"error"}
    code, body = _req(host, port, "GET", "/v1/nope")
    assert code == 404 and set(body) == {"error"}
    code, body = _req(host, port, "GET", "/openapi.json", token=None)
    assert code in (401, 404) and set(body) == {"error"}


def test_slow_headers_do_not_lock_out_other_clients(served):
    """Slowloris, without a token: 140 connections that send a request head a header line at a
    time. Before, uvicorn counted them against its 128-connection bound and answered every
    other client 503 for as long as they trickled (35 s measured, no end); now the server
    closes a connection whose head is not complete in time, and counts none of them."""
    host, port, _, _ = served
    slow = []
    for _ in range(140):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    time.sleep(0.5)
    for s in slow:
        s.sendall(b"X-Slow: 1\r\n")
    code, body = _req(host, port, "GET", "/v1/health")
    assert code == 200 and body["ok"] is True
    # past the head timeout, the server has closed them (a read gives EOF, or a reset)
    time.sleep(HEAD_TIMEOUT_S + 1.0)
    closed = 0
    for s in slow:
        try:
            s.sendall(b"X-Slow: 2\r\n")
            closed += s.recv(1024) == b""
        except OSError:
            closed += 1
        s.close()
    assert closed == len(slow)


def _big_strings(obj, skip: tuple, limit: int = 1 << 20) -> list[int]:
    """Sizes of the strings over ``limit`` characters reachable from ``obj`` (not through
    objects of the types in ``skip``)."""
    import gc
    import types

    skip = skip + (types.ModuleType, types.FunctionType, type)  # code, not the job's data
    seen, todo, out = set(), [obj], []
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, skip):
            continue
        seen.add(id(o))
        if isinstance(o, str):
            if len(o) > limit:
                out.append(len(o))
            continue
        todo.extend(gc.get_referents(o))
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_finished_jobs_do_not_keep_the_candidates_source(tmp_path):
    """The server keeps the last 1,000 finished jobs for clients to fetch. Before, each kept
    its whole request, so 20 cancelled 15 MiB candidates grew the server by 375 MiB for good
    (1,000 of them: ~19 GiB). A finished job keeps its names and traces, not the source."""
    import threading as _threading

    from solbench.serve.api import EvalRequest
    from solbench.spec import Problem, load_problem, load_solution
    from solbench.suites import resolve_problem

    prob = load_problem(resolve_problem("l1/relu_fp32"))
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n\ndef run(x):\n    return torch.relu(x)\n#" + "x" * (4 << 20) + "\n")
    service = Service([tmp_path], "cpu", spares=0)
    try:
        base = {"problem": "l1/relu_fp32", "device": "cpu", "timing": False, "rounds": 1,
                "workloads": [prob.workloads[0].uuid]}
        first = service.submit(EvalRequest(**base))  # the lane takes it: the next one stays queued
        job = service.submit(EvalRequest(**base, solution=load_solution(cand, prob).model_dump(mode="json")))
        assert _big_strings(job, (Problem, type(_threading.Condition()))), "the probe finds the source"
        service.cancel(job)
        assert job.state == "cancelled"
        assert _big_strings(job, (Problem, type(_threading.Condition()))) == []
        v = job.view()
        assert v.solution == "cand" and v.problem == "relu_fp32" and v.state == "cancelled"
        first.wait(0, 0, 120)
    finally:
        service.close()


def test_hardware_named_without_a_slash_is_checked_against_the_roots(served, tmp_path_factory,
                                                                     monkeypatch):
    """``--hardware`` reads any existing path it is given, with or without a slash or .toml;
    before, the server checked the roots only for a value with a slash or ending in .toml, so a
    bare name of a file in its working folder (outside the roots) was read, and ``..`` was a
    500 with a plain-text body."""
    from solbench.sol.hwspec import HARDWARE_DIR

    host, port, _, _ = served
    cwd = tmp_path_factory.mktemp("cwd")  # not under the served roots
    (cwd / "myspec").write_text((HARDWARE_DIR / "H100_SXM.toml").read_text())
    monkeypatch.chdir(cwd)
    for hw in ("myspec", "..", "."):
        body = json.dumps({"problem": "l1/relu_fp32", "device": "cpu", "hardware": hw}).encode()
        code, got = _req(host, port, "POST", "/v1/jobs", body=body)
        assert code == 403 and "allowed roots" in got["error"], (hw, code, got)
