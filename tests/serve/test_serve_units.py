"""solbench serve's pieces without a server: the fair queue, the token check, the loopback
test, the token file's mode and the request model."""

from __future__ import annotations

import os
import threading

import pytest

pytest.importorskip("fastapi")

from solbench.serve.api import EvalRequest  # noqa: E402
from solbench.serve.queue import FairQueue  # noqa: E402
from solbench.serve.token import TokenError, is_loopback, read_token_file, server_token, token_ok  # noqa: E402


def test_fair_queue_round_robin_fifo_per_client():
    q: FairQueue[str] = FairQueue()
    for j in ("a1", "a2", "a3"):
        q.put("A", j)
    q.put("B", "b1")
    q.put("C", "c1")
    q.put("C", "c2")
    # turn order A B C; each turn takes that client's oldest job
    assert q.position("A", "a1") == 0
    assert q.position("B", "b1") == 1
    assert q.position("C", "c2") == 4  # a1 b1 c1 a2 | c2
    assert q.position("A", "a3") == 5
    got = [q.get(timeout=1) for _ in range(6)]
    assert got == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert q.get(timeout=0.01) is None


def test_fair_queue_rejoin_and_remove():
    q: FairQueue[str] = FairQueue()
    q.put("A", "a1")
    q.put("B", "b1")
    assert q.get() == "a1"  # A leaves the turn order, B is next
    q.put("A", "a2")  # A joins again at the end
    q.put("B", "b2")
    assert q.remove("B", "b2") and not q.remove("B", "b2")
    assert [q.get(timeout=1), q.get(timeout=1)] == ["b1", "a2"]
    assert len(q) == 0


def test_fair_queue_close_wakes_waiters():
    q: FairQueue[str] = FairQueue()
    out = []
    th = threading.Thread(target=lambda: out.append(q.get()))
    th.start()
    q.close()
    th.join(timeout=5)
    assert out == [None]


def test_token_ok():
    tok = "s3cret-token-of-enough-length"
    assert token_ok(tok, f"Bearer {tok}")
    assert not token_ok(tok, f"Bearer {tok}x")
    assert not token_ok(tok, f"Bearer {tok[:-1]}")
    assert not token_ok(tok, tok)  # no scheme
    assert not token_ok(tok, None)
    assert token_ok(None, None)  # no token required


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("127.1.2.3") and is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")


def test_token_file_mode_and_default(tmp_path, monkeypatch):
    monkeypatch.delenv("SOLBENCH_SERVE_TOKEN", raising=False)
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(tmp_path / "data"))
    tok, where = server_token()
    assert where == str(tmp_path / "data" / "serve.token") and len(tok) >= 40
    assert os.stat(where).st_mode & 0o777 == 0o600
    assert server_token()[0] == tok  # made once, then read
    f = tmp_path / "t"
    f.write_text("a-token-long-enough-1234\n")
    os.chmod(f, 0o644)
    with pytest.raises(TokenError, match="0600"):
        read_token_file(f)
    os.chmod(f, 0o600)
    assert read_token_file(f) == "a-token-long-enough-1234"
    monkeypatch.setenv("SOLBENCH_SERVE_TOKEN", "env-token-long-enough-99")
    assert server_token(f) == ("env-token-long-enough-99", "$SOLBENCH_SERVE_TOKEN")


def test_request_model_refuses_unknown_and_bad_fields():
    from pydantic import ValidationError

    EvalRequest(problem="l1/relu_fp32", device="cuda:1", seed=7)
    for bad in ({"problem": "x", "devcie": "cpu"}, {"problem": "x", "device": "tpu"},
                {"problem": "x", "rounds": 0}, {"problem": ""}, {"problem": "x", "seed": -1}):
        with pytest.raises(ValidationError):
            EvalRequest(**bad)


def test_serve_without_the_extra_says_which(monkeypatch):
    """Without fastapi/uvicorn, `solbench serve` ends with one line naming the extra."""
    import sys

    from typer.testing import CliRunner

    from solbench.cli import app

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    res = CliRunner().invoke(app, ["serve", "--port", "0"])
    assert res.exit_code == 2
    out = res.stderr.strip()
    assert "solbench[serve]" in out and len(out.splitlines()) == 1


def test_client_refuses_a_url_without_scheme_and_names_an_absent_server():
    from solbench.serve.client import ServeClient, ServeError

    with pytest.raises(ServeError, match="not an http"):
        ServeClient("127.0.0.1:8765")
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ServeError, match="is `solbench serve` running") as e:
        ServeClient(f"http://127.0.0.1:{port}", token="t" * 20).health()
    assert e.value.status == 0


@pytest.mark.slow
def test_closing_a_service_mid_evaluation_leaves_the_process_able_to_evaluate(tmp_path):
    """A Service closed while a candidate hangs ends that evaluation (its workers killed) but
    not the process's harness: a library user's process (or a test session) evaluates again
    afterwards. Before, the close latched the harness's shutdown for good and every later
    evaluation in the process was RUNTIME_ERROR "solbench is shutting down"."""
    import time

    from solbench import harness
    from solbench.serve.service import Service
    from solbench.spec import load_problem, reference_solution
    from solbench.suites import resolve_problem

    hang = {"spec": {"languages": ["pytorch"], "entry_point": "h.py::run"},
            "sources": [{"path": "h.py", "content": "import time\n\ndef run(x):\n    time.sleep(1000)\n"}],
            "name": "hang", "definition": "relu_fp32", "author": "test"}
    prob = load_problem(resolve_problem("l1/relu_fp32"))
    service = Service([tmp_path], "cpu", spares=0)
    try:
        job = service.submit(EvalRequest(problem="l1/relu_fp32", solution=hang, timing=False, rounds=1,
                                         workloads=[prob.workloads[0].uuid], first_call_timeout_s=600))
        t0 = time.monotonic()
        while job.state != "running" and time.monotonic() - t0 < 120:
            time.sleep(0.1)
        assert job.state == "running"
        time.sleep(2.0)  # the candidate's first call is under way
    finally:
        service.close()
    (t,) = harness.evaluate(prob, reference_solution(prob),
                            harness.EvalConfig(device="cpu", workloads=[prob.workloads[0].uuid], rounds=1,
                                               timing=False))
    assert t.evaluation.status.value == "PASSED", t.evaluation.log


def test_queue_bounds_hold_across_client_labels(tmp_path, monkeypatch):
    """The per-client bound is per label, and a label is the request's own word: a submitter
    that changes it per request passes that bound, never the server's bounds on jobs and on
    request bytes queued across all clients (429, the job not queued). No lane takes a job here
    (its loop is replaced), so what is queued is exactly what was accepted."""
    from solbench.serve import service as svc
    from solbench.serve.service import RequestError, Service

    monkeypatch.setattr(svc.Lane, "_loop", lambda self: None)
    reqs = [EvalRequest(problem="l1/relu_fp32", client=f"label-{i}", timing=False) for i in range(4)]
    size = len(reqs[0].model_dump_json())
    assert all(len(r.model_dump_json()) == size for r in reqs)  # labels of one length

    s = Service([tmp_path], "cpu", spares=0, max_queued=1, max_queued_total=3)
    try:
        for r in reqs[:3]:
            s.submit(r)
        with pytest.raises(RequestError) as e:
            s.submit(reqs[3])
        assert e.value.status == 429 and "3 jobs queued (all clients)" in e.value.message
        with pytest.raises(RequestError) as e:  # the per-client bound still holds for one label
            s.submit(reqs[0])
        assert e.value.status == 429 and "label-0" in e.value.message
        assert sum(1 for j in s.jobs.values() if j.state == "queued") == 3
    finally:
        s.close()

    # bytes: room for exactly two requests of this size
    s = Service([tmp_path], "cpu", spares=0, max_queued_total=100, max_queued_bytes=2 * size)
    try:
        s.submit(reqs[0])
        s.submit(reqs[1])
        with pytest.raises(RequestError) as e:
            s.submit(reqs[2])
        assert e.value.status == 429 and f"{2 * size:,} bytes" in e.value.message
        # a cancelled job frees its bytes
        s.cancel(next(iter(s.jobs.values())))
        s.submit(reqs[2])
    finally:
        s.close()
