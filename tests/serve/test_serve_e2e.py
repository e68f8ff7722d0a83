"""solbench serve end to end on the CPU: a server on loopback in a subprocess, 20 candidates
in a row for l1/softmax_fp32 (some hostile), each verdict the same as a local evaluation of
the same candidate with the same seed; the server alive after; the token, the allowed roots
and the body bound enforced."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from solbench.serve.client import ServeClient, ServeError  # noqa: E402

PROBLEM = "l1/softmax_fp32"
SEED = 20251205
TIMEOUT_S = 10.0
DEMO = Path(__file__).resolve().parents[2] / "src" / "solbench" / "demo"

HONEST = "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=1)\n"
SEGV = "import ctypes\n\ndef run(x):\n    ctypes.string_at(0)\n"
HANG = "import time\n\ndef run(x):\n    time.sleep(1000)\n"
BUILD_FAIL = "import torch\n\nraise RuntimeError('refuses to import')\n\n\ndef run(x):\n    return x\n"
# reaches for the server's port from inside the sandbox: if it gets through it answers
# zeros (INCORRECT_NUMERICAL); where the sandbox has no network it computes softmax (PASSED)
NETPROBE = """import socket
import torch

PORT = {port}


def _reached():
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
        return True
    except OSError:
        return False


def run(x):
    if _reached():
        return torch.zeros_like(x)
    return torch.softmax(x, dim=1)
"""

# a worker reused across candidates would hand this one its own earlier import's mark (one
# interpreter, builtins shared): it then answers zeros (INCORRECT_NUMERICAL); in a fresh worker
# per candidate it never sees one (PASSED), however often it is submitted
STATEFUL = """import builtins

import torch

SEEN = getattr(builtins, "_solbench_serve_seen", False)
builtins._solbench_serve_seen = True


def run(x):
    if SEEN:
        return torch.zeros_like(x)
    return torch.softmax(x, dim=1)
"""

# kind -> the status worked out from what the candidate does (the harness's own tests and
# `solbench demo` hold the same expectations for these candidates)
EXPECTED = {"honest": "PASSED", "segv": "RUNTIME_ERROR", "hang": "TIMEOUT",
            "build_fail": "COMPILE_ERROR", "replay": "REWARD_HACK", "timer": "REWARD_HACK",
            "uniform": "INCORRECT_NUMERICAL", "netprobe": "PASSED", "stateful": "PASSED"}
ORDER = ["honest", "segv", "honest", "replay", "netprobe", "uniform", "hang", "stateful", "timer",
         "build_fail", "segv", "honest", "replay", "netprobe", "uniform", "stateful", "timer", "hang",
         "build_fail", "honest"]


def _start(args: list[str], env: dict, timeout_s: float = 180.0):
    """A ``solbench serve`` subprocess and its URL (from its first stdout line)."""
    from solbench.proc.registry import OWN

    # this test process also evaluates in-process (the local verdicts to compare with): its
    # stray-process guard takes every child it cannot account for, once a worker has started,
    # for a candidate's leftover, so a host that starts its own long-lived child registers it
    with OWN.lock:
        proc = subprocess.Popen([sys.executable, "-m", "solbench.cli", "serve", *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        OWN.add(proc.pid, survive=True)
    t0 = time.monotonic()
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+?):(\d+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"server did not start in {time.monotonic() - t0:.0f} s: "
                             f"{line!r} {proc.stderr.read()[-2000:]}")
    return proc, f"{m.group(1)}:{m.group(2)}"


def _stop(proc) -> None:
    from solbench.proc.registry import OWN

    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    OWN.discard(proc.pid)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tok = secrets.token_urlsafe(24)
    root = tmp_path_factory.mktemp("roots")
    env = {**os.environ, "SOLBENCH_SERVE_TOKEN": tok, "SOLBENCH_SOL_CACHE": "off"}
    proc, url = _start(["--port", "0", "--device", "cpu", "--spares", "2", "--root", str(root)], env)
    try:
        yield proc, url, tok, root
    finally:
        _stop(proc)


def _candidates(folder: Path, port: int) -> dict[str, Path]:
    src = {"honest": HONEST, "stateful": STATEFUL, "segv": SEGV, "hang": HANG, "build_fail": BUILD_FAIL,
           "netprobe": NETPROBE.format(port=port),
           "replay": (DEMO / "softmax_replay.py").read_text(),
           "timer": (DEMO / "softmax_timer_patch.py").read_text(),
           "uniform": (DEMO / "softmax_uniform.py").read_text()}
    out = {}
    for kind, text in src.items():
        p = folder / f"{kind}.py"
        p.write_text(text)
        out[kind] = p
    return out


def _local(problem, path: Path, uuid: str):
    """What ``solbench eval PROBLEM --solution PATH -w 0 --device cpu --seed SEED --timeout
    10`` gives: the same call of the same function, in this process."""
    from solbench.harness import EvalConfig
    from solbench.run.session import evaluate_and_score
    from solbench.spec import load_solution

    cfg = EvalConfig(device="cpu", seed=SEED, workloads=[uuid])
    cfg = cfg.with_timeout(TIMEOUT_S)
    return evaluate_and_score(problem, load_solution(path, problem), cfg)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_twenty_candidates_same_verdicts_as_local(server, tmp_path):
    from solbench.spec import load_problem
    from solbench.suites import resolve_problem

    proc, url, tok, _ = server
    port = int(url.rsplit(":", 1)[1])
    cands = _candidates(tmp_path, port)
    problem = load_problem(resolve_problem(PROBLEM))
    uuid = problem.workloads[0].uuid
    c = ServeClient(url, token=tok, client="test")
    got, walls = [], []
    for kind in ORDER:
        t0 = time.perf_counter()
        traces = c.evaluate(PROBLEM, cands[kind], workloads=[0], device="cpu", seed=SEED,
                            first_call_timeout_s=TIMEOUT_S, call_timeout_s=TIMEOUT_S)
        walls.append(time.perf_counter() - t0)
        assert len(traces) == 1 and traces[0].workload.uuid == uuid
        got.append(traces[0])
        assert proc.poll() is None, f"server died after the {kind} candidate"
    print("\nserver wall per candidate (s):", " ".join(f"{k}={w:.1f}" for k, w in zip(ORDER, walls)))
    local = {}
    for kind in EXPECTED:
        t0 = time.perf_counter()
        local[kind] = _local(problem, cands[kind], uuid)[0]
        print(f"local {kind}: {local[kind].evaluation.status.value} in {time.perf_counter() - t0:.1f} s")
    for kind, t in zip(ORDER, got):
        st = t.evaluation.status.value
        assert st == EXPECTED[kind], f"{kind}: server says {st}: {t.evaluation.log[-800:]}"
        assert st == local[kind].evaluation.status.value, (kind, [
            (f.check, f.severity, f.message[:300]) for x in (t, local[kind]) for f in x.evaluation.findings
            if f.severity != "advisory"])
        assert t.evaluation.input_seed == local[kind].evaluation.input_seed  # the same seed's fingerprint
        assert t.solution == local[kind].solution
        assert t.evaluation.solution_hash == local[kind].evaluation.solution_hash
    # same seed, same input sets: the correctness rounds' seeds match the local run's
    hon = [t for k, t in zip(ORDER, got) if k == "honest"]
    assert hon[0].evaluation.input_seeds == local["honest"].evaluation.input_seeds
    # the server is alive and answers after them all
    assert c.health()["ok"] is True
    st = c.status()
    assert st["lanes"]["cpu"]["done"] >= len(ORDER) and st["lanes"]["cpu"]["queued"] == 0
    first, later = walls[0], min(w for k, w in zip(ORDER[1:], walls[1:]) if k == "honest")
    print(f"first evaluation {first:.2f} s, fastest later honest one {later:.2f} s "
          f"(worker_start {hon[0].evaluation.phases_s.get('worker_start')} s first, "
          f"{min(t.evaluation.phases_s.get('worker_start', 99) for t in hon[1:])} s later)")


@pytest.mark.slow
def test_cli_eval_server_same_output_as_local(server, tmp_path):
    proc, url, tok, _ = server
    cand = tmp_path / "honest.py"
    cand.write_text(HONEST)
    # the client only sends and prints: it runs in a process where importing torch fails
    from tests.sol.test_warm_without_torch import _REFUSE_TORCH

    site = tmp_path / "refuse-torch"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_REFUSE_TORCH)
    env = {**os.environ, "SOLBENCH_SERVE_TOKEN": tok,
           "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = tmp_path / "traces.jsonl"
    args = [sys.executable, "-m", "solbench.cli", "eval", PROBLEM, "--solution", str(cand), "-w", "0",
            "--seed", str(SEED)]
    remote = subprocess.run(args + ["--device", "cpu", "--json", "-q", "--server", url, "-o", str(out)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert remote.returncode == 0, remote.stderr
    (t,) = json.loads(remote.stdout)
    assert t["evaluation"]["status"] == "PASSED" and t["solution"] == "honest"
    # no --device: the server's own (cpu here), named in the table's title
    table = subprocess.run(args + ["--server", url], env=env, capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "on cpu" in table.stdout and "1/1 workloads PASSED" in table.stdout
    # stored like a local run's traces: signed lines that verify with this user's key
    from solbench.store import read_store

    rs = read_store(out)
    assert rs.provenance == ["verified"] and not rs.rejected
    # a refusal is one line naming the problem, exit 2
    bad = subprocess.run([sys.executable, "-m", "solbench.cli", "eval", str(tmp_path), "--device", "cpu",
                          "--server", url], env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2


def _raw(url: str, path: str, token: str | None, body: bytes | None = None, method: str = "GET"):
    req = urllib.request.Request(url + path, data=body, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
def test_refusals(server, tmp_path):
    proc, url, tok, root = server
    assert _raw(url, "/v1/health", None)[0] == 401
    assert _raw(url, "/v1/health", tok + "x")[0] == 401
    assert _raw(url, "/v1/health", tok) == (200, {"ok": True, "version": _raw(url, "/v1/health", tok)[1]["version"]})
    # a problem outside the allowed roots is refused before anything of it is loaded
    outside = tmp_path / "prob"
    outside.mkdir()
    code, body = _raw(url, "/v1/jobs", tok, json.dumps({"problem": str(outside)}).encode(), "POST")
    assert code == 403 and "allowed roots" in body["error"]
    code, body = _raw(url, "/v1/jobs", tok, json.dumps({"problem": str(root / "nope")}).encode(), "POST")
    assert code == 404
    # a symlink inside a root that leads outside it is refused too
    (root / "link").symlink_to(outside)
    code, body = _raw(url, "/v1/jobs", tok, json.dumps({"problem": str(root / "link")}).encode(), "POST")
    assert code == 403
    code, body = _raw(url, "/v1/jobs", tok, json.dumps({"problem": PROBLEM, "devcie": "cpu"}).encode(), "POST")
    assert code == 400 and "devcie" in body["error"]
    code, body = _raw(url, "/v1/jobs", tok, json.dumps({"problem": PROBLEM, "workloads": ["nope"]}).encode(), "POST")
    assert code == 400 and "nope" in body["error"]
    # a body over the bound (16 MiB by default) is refused on its declared length, before
    # a byte of it is read (the client sends only the headers here)
    import http.client

    host, port = url.split("//")[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/v1/jobs")
    conn.putheader("Authorization", f"Bearer {tok}")
    conn.putheader("Content-Length", str(17 << 20))
    conn.endheaders()
    r = conn.getresponse()
    assert r.status == 413 and "--max-body" in json.loads(r.read())["error"]
    conn.close()
    assert _raw(url, "/v1/jobs/0123456789abcdef", tok)[0] == 404
    assert proc.poll() is None


@pytest.mark.slow
def test_non_loopback_requires_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SOLBENCH_SERVE_TOKEN"}
    refused = subprocess.run([sys.executable, "-m", "solbench.cli", "serve", "--host", "0.0.0.0",
                              "--port", "0", "--no-token"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "not loopback" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    tokf = tmp_path / "tok"
    tokf.write_text("the-right-token-0123456789\n")
    os.chmod(tokf, 0o600)
    proc, url = _start(["--host", "0.0.0.0", "--port", "0", "--device", "cpu", "--spares", "0",
                        "--token-file", str(tokf)], env)
    try:
        url = url.replace("0.0.0.0", "127.0.0.1")
        assert _raw(url, "/v1/status", "the-wrong-token-0123456789")[0] == 401
        assert _raw(url, "/v1/status", None)[0] == 401
        assert _raw(url, "/v1/status", "the-right-token-0123456789")[0] == 200
        with pytest.raises(ServeError) as e:
            ServeClient(url, token="the-wrong-token-0123456789").health()
        assert e.value.status == 401
    finally:
        _stop(proc)


@pytest.mark.slow
def test_clients_queued_fairly(server, tmp_path):
    """A's three jobs and then B's one, submitted at once: B's runs before A's third (round-robin
    across clients), where one FIFO for all would run it last."""
    proc, url, tok, _ = server
    cand = tmp_path / "honest.py"
    cand.write_text(HONEST)
    from solbench.spec import load_problem, load_solution
    from solbench.suites import resolve_problem

    problem = load_problem(resolve_problem(PROBLEM))
    req = {"problem": str(Path(problem.path).resolve()), "device": "cpu", "timing": False, "rounds": 1,
           "solution": load_solution(cand, problem).model_dump(mode="json"),
           "workloads": [problem.workloads[0].uuid]}
    a, b = ServeClient(url, token=tok, client="A"), ServeClient(url, token=tok, client="B")
    jobs = [a.submit(req), a.submit(req), a.submit(req), b.submit(req)]
    assert jobs[3]["position"] is not None
    done = []
    for j in jobs:
        while True:
            v = a.job(j["id"], wait=25)
            if v["state"] in ("done", "failed", "cancelled"):
                break
        assert v["state"] == "done" and v["traces"][0]["evaluation"]["status"] == "PASSED"
        done.append(v)
    order = [v["client"] + str(i) for i, v in sorted(enumerate(done), key=lambda p: p[1]["started_at"])]
    assert order == ["A0", "A1", "B3", "A2"], order
    # a queued job can be cancelled, a finished one cannot
    with pytest.raises(ServeError) as e:
        a.cancel(jobs[0]["id"])
    assert e.value.status == 409
