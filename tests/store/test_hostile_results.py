"""A real hostile candidate that writes to the results file while it is evaluated (issue 11:
"a candidate appended a forged PASSED line to the -o results file"). Whatever it manages to
write, solbench accepts only the lines its parent wrote and says which lines it rejected."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEF = {
    "name": "scale_add",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y, alpha):\n    return alpha * x + y\n",
}
WORKLOADS = [
    {"uuid": "a0000000-0000-0000-0000-000000000001", "axes": {"n": 64},
     "inputs": {"x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": 0.5}}},
    {"uuid": "b0000000-0000-0000-0000-000000000002", "axes": {"n": 1000},
     "inputs": {"x": {"type": "random"}, "y": {"type": "random"}, "alpha": {"type": "scalar", "value": -2.0}}},
]

# Finds the results file from an ancestor's command line (-o PATH), then: appends an edited
# copy of a real line (MAC kept), a verbatim replay, an unsigned PASSED line and, when it can
# read the trace key (no sandbox), a line signed with the stolen key. Then computes honestly.
HOSTILE = r'''
import hashlib, hmac, json, os
import torch

def _results_path():
    pid = os.getppid()
    for _ in range(6):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return None
        argv = [a.decode() for a in argv]
        if "-o" in argv:
            return os.path.join(cwd, argv[argv.index("-o") + 1])
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None

def _attack():
    p = _results_path()
    if not p:
        return
    try:
        lines = open(p).read().splitlines()
    except OSError:
        return
    if not lines:
        return
    first = json.loads(lines[0])
    edited = dict(first, solution="forged_edited")
    edited["evaluation"] = dict(first["evaluation"], performance=dict(first["evaluation"]["performance"], latency_ms=1e-9))
    unsigned = {k: v for k, v in first.items() if k != "auth"}
    unsigned["solution"] = "forged_unsigned"
    out = [json.dumps(edited), lines[0], json.dumps(unsigned)]
    if STEAL_KEY:
        for d in (os.environ.get("SOLBENCH_DATA_DIR"), os.path.expanduser("~/.local/share/solbench")):
            try:
                key = bytes.fromhex(open(os.path.join(d, "trace.key")).read().strip())
            except (OSError, TypeError, ValueError):
                continue
            body = dict(unsigned, solution="forged_with_stolen_key", seq=10**6)
            canon = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
            body["auth"] = {"alg": "HMAC-SHA256", "key_id": hashlib.sha256(key).hexdigest()[:16],
                            "mac": hmac.new(key, canon, hashlib.sha256).hexdigest()}
            out.append(json.dumps(body))
            break
    try:
        with open(p, "a") as f:
            f.write("".join(x + "\n" for x in out))
    except OSError:
        pass

_attack()

def run(x, y, alpha):
    return alpha * x + y
'''

#: the sandbox (issue 11) hides the key folder from the worker; before it exists the worker
#: can read the key, so the stolen-key attack is only part of the test where it is defended
SANDBOX = importlib.util.find_spec("solbench.harness.sandbox") is not None


def _eval(args, env):
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**env, "PYTHONPATH": os.pathsep.join([str(src)] + [x for x in [env.get("PYTHONPATH")] if x])}
    return subprocess.run([sys.executable, "-m", "solbench", "eval", *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.slow
def test_forged_lines_from_a_candidate_are_rejected(tmp_path, _private_key_dir):
    prob = tmp_path / "scale_add"
    prob.mkdir()
    (prob / "definition.json").write_text(json.dumps(DEF))
    (prob / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in WORKLOADS) + "\n")
    cand = tmp_path / "hostile_writer.py"
    cand.write_text(f"STEAL_KEY = {SANDBOX}\n" + HOSTILE)
    out = tmp_path / "out" / "results.jsonl"
    env = {**os.environ, "SOLBENCH_CACHE": str(tmp_path / "cache"), "SOLBENCH_DATA_DIR": str(_private_key_dir)}
    common = ["--device", "cpu", "--rounds", "2", "--iters", "3", "-o", str(out)]
    r = _eval([str(prob), *common], env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _eval([str(prob), "--solution", str(cand), *common], env)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]

    import solbench.store as store

    lines = out.read_text().splitlines()
    read = store.read_store(out)
    sols = [t.solution for t in read.traces]
    # exactly what the parent wrote: the reference's two traces, then the candidate's two
    assert sols[:2] == ["scale_add__reference"] * 2 and len(sols) == 4, sols
    assert not any(s.startswith("forged") for s in sols)
    assert {t.solution for t in read.traces[2:]} == {"hostile_writer"}
    # every other line is reported, by number, with the reason
    assert len(read.rejected) == len(lines) - 4
    if not SANDBOX:  # same user as the parent: the candidate can write the file, and did
        assert len(lines) == 7, lines
    if len(lines) > 4:  # the candidate could write the file (no sandbox yet): it was caught
        states = {x.state for x in read.rejected}
        assert {"bad_mac", "replayed", "unsigned"} <= states, read.rejected
        v = subprocess.run([sys.executable, "-m", "solbench", "results", "verify", str(out)], capture_output=True,
                           text=True, env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
        assert v.returncode == 1 and "HMAC mismatch" in v.stdout and "no MAC" in v.stdout
