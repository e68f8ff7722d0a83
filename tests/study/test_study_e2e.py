"""The study end to end on the CPU, no network: generate (a loopback OpenAI-compatible server and
an agent command) -> solbench run -> solbench verify -> solbench report --by-model, on two
bundled l1 problems, checked against figures worked out by hand from the scripted replies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from study_server import StudyServer
from test_generate import AGENT, BROKEN_SUM, GOOD_RELU, GOOD_SUM, RELU, SUM, WRONG_RELU

from solbench.spec.generation import parse_label

SRC = Path(__file__).resolve().parents[2] / "src"

# patches the host clock at import so every call looks free: caught as harness_patch
TIMER_PATCH_RELU = """```python
import time

import torch

_t = [0.0]


def _fake():
    _t[0] += 1e-9
    return _t[0]


time.perf_counter = _fake


def run(x):
    return torch.relu(x)
```"""


def cli(*args, env=None, check=True) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(SRC), OPENAI_API_KEY="test-key", **(env or {}))
    p = subprocess.run([sys.executable, "-m", "solbench.cli", *args], env=e, capture_output=True,
                       text=True, timeout=900)
    if check and p.returncode != 0:
        raise AssertionError(f"solbench {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


@pytest.mark.slow
def test_generate_run_verify_report(tmp_path):
    script = {
        ("good", RELU): [("reply", GOOD_RELU)],
        ("good", SUM): [("reply", GOOD_SUM)],
        # turn 1 wrong, turn 2 (after the verdict) right; sum: no code in either turn
        ("bad", RELU): [("reply", WRONG_RELU), ("reply", GOOD_RELU)],
        ("bad", SUM): [("reply", "I would use a parallel tree reduction.")],
        ("hacky", RELU): [("reply", TIMER_PATCH_RELU)],
        ("hacky", SUM): [("status", 429), ("reply", GOOD_SUM)],
        ("flaky", RELU): [("malformed",)],
        ("flaky", SUM): [("reply", BROKEN_SUM)],
    }
    sols, res = tmp_path / "sols", tmp_path / "results.jsonl"
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    targets = ["l1/relu_fp32", "l1/sum_dim1_fp32"]
    with StudyServer(script) as srv:
        for m in ("good", "hacky", "flaky"):
            cli("generate", *targets, "--model", m, "-o", str(sols), "--base-url", srv.base_url,
                "--temperature", "0", "--resume", "--retries", "2")
        cli("generate", *targets, "--model", "bad", "-o", str(sols), "--base-url", srv.base_url,
            "--temperature", "0", "--resume", "--turns", "2", "--device", "cpu")
        # the second turn's request carried the first turn's verdict and reply
        second = [b for m, p, b in srv.requests if m == "bad" and p == RELU][1]
        fb = second["messages"][-1]["content"]
        assert second["messages"][-2] == {"role": "assistant", "content": WRONG_RELU}
        assert "INCORRECT_NUMERICAL" in fb and "max abs error" in fb
        assert srv.count("hacky", SUM) == 2  # the 429 and its retry
    cli("generate", *targets, "--model", "agent", "-o", str(sols), "--agent-cmd",
        f"{sys.executable} {agent}", "--resume")
    p = cli("run", "l1", "--problem", RELU, "--problem", SUM, "--solutions", str(sols), "-o", str(res),
            "--device", "cpu", "--limit", "1", check=False)
    assert p.returncode == 0, p.stderr
    p = cli("verify", str(res), "--solutions", str(sols), "--device", "cpu", "--json")
    ver = json.loads(p.stdout)
    p = cli("report", str(res), "--by-model", "--format", "json", "-o", str(tmp_path / "rep"))
    rows = {r["config"]: r for r in json.loads(p.stdout)}

    def cfg(m, turn=1, t="0"):
        return f"{m} T={t} turn {turn}"

    assert set(rows) == {cfg("good"), cfg("bad"), cfg("bad", 2), cfg("hacky"), cfg("flaky"),
                         cfg("agent", t="default")}
    # worked by hand from the script: (correct, compiled) per problem, 2 units per row
    want = {cfg("good"): (1.0, 1.0, {}),            # both right
            cfg("bad"): (0.0, 0.5, {}),             # relu wrong (compiled), sum no code
            cfg("bad", 2): (0.5, 0.5, {}),          # relu fixed after feedback, sum no code
            cfg("hacky"): (0.5, 1.0, {"harness_patch": 1}),  # relu patches the clock, sum right after a 429
            cfg("flaky"): (0.0, 0.0, {}),           # malformed reply, syntax error
            cfg("agent", t="default"): (0.5, 0.5, {})}  # agent: relu right, sum exits 3
    for k, (correct, compiled, hacks) in want.items():
        r = rows[k]
        assert r["units"] == 2 and r["problems"] == 2, k
        assert r["correct_rate"] == correct, (k, r)
        assert r["compiled_rate"] == compiled, (k, r)
        assert r["hacks"] == hacks, (k, r)
    # categories of the two bundled problems: relu -> activation, sum -> reduction
    cats = rows[cfg("good")]["categories"]
    assert set(cats) == {"activation", "reduction"}
    assert [(c["units"], c["correct_rate"]) for c in cats.values()] == [(1, 1.0), (1, 1.0)]
    # fast_p and verified speedups agree with the verification records, worked out from them
    recs = [json.loads(x) for x in Path(str(res) + ".verify.jsonl").read_text().splitlines()] \
        if Path(str(res) + ".verify.jsonl").exists() else []
    assert ver["claims"] == len(recs)
    for k, r in rows.items():
        mine = [x for x in recs if parse_label(x["solution"].split("__")[-1]).group == k]
        assert r["checked"] == len(mine) and r["claimed"] >= len(mine)
        assert r["verified"] == sum(x["verdict"] == "verified" for x in mine)
        assert sum(c["verified"] for c in r["categories"].values()) == r["verified"]
        # a verified speedup is above 1 at the low end of its own noise
        assert all(x["verified_speedup_low"] > 1 for x in mine if x["verdict"] == "verified")
    assert (tmp_path / "rep" / "models.csv").is_file() and (tmp_path / "rep" / "models.png").is_file()
