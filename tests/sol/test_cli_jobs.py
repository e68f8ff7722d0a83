"""`solbench sol --jobs`: worker processes only when asked or for a large run, and the same
output as one process, in the same order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli.sol import AUTO_POOL_MIN_PROBLEMS, auto_jobs

ADD = """import torch
def run(x):
    return x + SCALE
"""


def _problem(root: Path, name: str, scale: float, ns=(64, 1024)) -> Path:
    d = root / name
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": name, "axes": {"N": {"type": "var"}}, "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}, "reference": ADD.replace("SCALE", str(scale))}))
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{n}", "axes": {"N": n}, "inputs": {"x": {"type": "random"}}}) + "\n" for n in ns))
    return d


def test_auto_jobs_uses_this_process_for_a_small_run():
    assert auto_jobs(0, 1, 8) == 1
    assert auto_jobs(0, AUTO_POOL_MIN_PROBLEMS - 1, 8) == 1
    assert auto_jobs(0, AUTO_POOL_MIN_PROBLEMS, 2) == 2
    assert auto_jobs(0, 59, 8) == 8
    assert auto_jobs(0, 59, None) == 1
    assert auto_jobs(1, 59, 8) == 1
    assert auto_jobs(4, 2, 8) == 2  # never more workers than problems
    with pytest.raises(ValueError):
        auto_jobs(-1, 3, 2)


def test_jobs_2_prints_what_one_process_prints_in_the_same_order(tmp_path):
    from solbench.cli import app

    dirs = [_problem(tmp_path, "a", 1.0), _problem(tmp_path, "b", 2.0, ns=(8,)), _problem(tmp_path, "c", 3.0)]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "definition.json").write_text("{not json")
    (broken / "workload.jsonl").write_text("")
    args = ["sol", str(dirs[0]), str(broken), str(dirs[1]), str(dirs[2]), "--json"]
    one = CliRunner().invoke(app, args + ["--jobs", "1"])
    two = CliRunner().invoke(app, args + ["--jobs", "2"])
    assert one.exit_code == two.exit_code == 1  # the broken problem is reported, the rest go on
    lines1 = [json.loads(x) for x in one.stdout.splitlines() if x.startswith("{")]
    lines2 = [json.loads(x) for x in two.stdout.splitlines() if x.startswith("{")]
    assert [x["problem"] for x in lines1] == ["a", str(broken), "b", "c"]
    assert lines1 == lines2
    # hand-worked: N fp32 read + N written = 8N bytes, N adds
    assert [w["bytes"]["fused"] for w in lines2[0]["workloads"]] == [8 * 64, 8 * 1024]
    assert "error" in lines2[1] and lines2[1]["workloads"] == []


def test_negative_jobs_is_a_one_line_error(tmp_path):
    from solbench.cli import app

    res = CliRunner().invoke(app, ["sol", str(_problem(tmp_path, "a", 1.0)), "--jobs", "-1"])
    assert res.exit_code == 2 and "--jobs" in res.output and "Traceback" not in res.output


def test_workers_get_the_value_reading_and_larger_problems_first(tmp_path):
    from solbench.cli.sol import VALUE_READ_WEIGHT, estimated_cost, schedule_order

    small = _problem(tmp_path, "small", 1.0, ns=(8,))                 # 1 workload
    large = _problem(tmp_path, "large", 1.0, ns=(8, 16, 32))          # 3 workloads
    reads = _problem(tmp_path, "reads", 1.0, ns=(8, 16))              # 2 workloads, reads values
    defn = json.loads((reads / "definition.json").read_text())
    defn["reference"] = "import torch\ndef run(x):\n    return x + x.sum().item()\n"
    (reads / "definition.json").write_text(json.dumps(defn))
    missing = tmp_path / "kb_model.py"                               # no problem directory: cost 1
    assert [estimated_cost(p) for p in (small, large, reads, missing)] == [1.0, 3.0, 2.0 * VALUE_READ_WEIGHT, 1.0]
    # reads (2 x weight) > large (3) > small (1) = missing (1, after small: argument order)
    assert schedule_order([small, large, reads, missing]) == [2, 1, 0, 3]


def test_the_default_hardware_is_said_and_a_named_one_is_not(tmp_path):
    from solbench.cli import app

    d = str(_problem(tmp_path, "a", 1.0, ns=(64,)))
    dflt = CliRunner().invoke(app, ["sol", d, "--json"])
    named = CliRunner().invoke(app, ["sol", d, "--json", "--hardware", "H200"])
    assert dflt.exit_code == named.exit_code == 0
    assert "no --hardware given: T_SOL on H200" in dflt.stderr
    assert "no --hardware given" not in named.stderr
    # the same bound either way, and stdout stays one JSON object a problem
    assert json.loads(dflt.stdout) == json.loads(named.stdout)


def _with_reference(d: Path, body: str) -> Path:
    """``d``'s reference with ``body`` run first (``n`` is N)."""
    defn = json.loads((d / "definition.json").read_text())
    defn["reference"] = "import os, signal, time\nimport torch\ndef run(x):\n    n = x.shape[0]\n" + body + \
        "    return x + 1.0\n"
    (d / "definition.json").write_text(json.dumps(defn))
    return d


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_reference_that_crashes_or_hangs_costs_its_workload_not_the_run(tmp_path, monkeypatch, jobs):
    """One reference kills its counting process at N = 64 (SIGSEGV), another hangs at N =
    1024: those two workloads get error rows saying how the count ended, every other workload
    (before and after them, and the other problems) its bound, in argument order, and no
    counting process is left behind; the command says so and exits 1."""
    import os

    from solbench.cli import app
    from solbench.sol import isolated

    monkeypatch.setattr(isolated, "PER_WORKLOAD_S", 8.0)
    a = _problem(tmp_path, "a", 1.0)
    crash = _with_reference(_problem(tmp_path, "crash", 1.0),
                            "    if n == 64:\n        os.kill(os.getpid(), signal.SIGSEGV)\n")
    hang = _with_reference(_problem(tmp_path, "hang", 1.0), "    if n == 1024:\n        time.sleep(600)\n")
    c = _problem(tmp_path, "c", 1.0)
    res = CliRunner().invoke(app, ["sol", str(a), str(crash), str(hang), str(c), "--json", "--jobs", jobs])
    assert res.exit_code == 1, res.output  # not every workload has a bound: said, and the status
    assert "2 workload(s) have no bound" in res.stderr
    got = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert [g["problem"] for g in got] == ["a", "crash", "hang", "c"]
    rows = {g["problem"]: g["workloads"] for g in got}
    for name in ("a", "c"):  # hand-worked: N fp32 read + N written
        assert [w["bytes"]["fused"] for w in rows[name]] == [8 * 64, 8 * 1024]
    assert rows["crash"][0]["sol_ms"] is None and "died of SIGSEGV while counting" in rows["crash"][0]["error"]
    assert rows["crash"][1]["bytes"]["fused"] == 8 * 1024
    assert rows["hang"][0]["bytes"]["fused"] == 8 * 64
    assert rows["hang"][1]["sol_ms"] is None and "did not finish in time" in rows["hang"][1]["error"]
    left = [p for p in os.listdir("/proc") if p.isdigit() and _is_counting_child(p)]
    assert left == []


def _is_counting_child(pid: str) -> bool:
    import os

    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return False
    return b"solbench.sol.isolated" in cmd and ppid == os.getpid()


def test_cache_is_filled_by_the_counting_child_and_read_back(tmp_path):
    """`solbench sol --cache DIR`: the counting child stores one signed entry per workload and
    a second run reads them back (the same output). An entry whose counts are changed on disk
    without the user's key is a miss (recounted: the hand-worked 8 bytes per element again); one
    re-signed with the key shows its changed field in the rows, so the rows come from the
    entries, not from a new count."""
    import hashlib
    import hmac

    from solbench.cli import app
    from solbench.store.auth import load_key

    d = _problem(tmp_path, "a", 1.0)
    cache = tmp_path / "cache"
    args = ["sol", str(d), "--json", "--cache", str(cache)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    entries = list(cache.rglob("*.json"))
    assert len(entries) == 2
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0 and json.loads(second.stdout) == json.loads(first.stdout)
    for f in entries:
        j = json.loads(f.read_text())
        j["counts"]["bytes_unfused"] = 12345.0
        f.write_text(json.dumps(j))
    third = CliRunner().invoke(app, args)
    assert [w["bytes"]["unfused"] for w in json.loads(third.stdout)["workloads"]] == [8 * 64, 8 * 1024]
    key = load_key(create=True)
    for f in cache.rglob("*.json"):
        j = json.loads(f.read_text())
        j["counts"]["bytes_unfused"] = 12345.0
        body = json.dumps(j["counts"], sort_keys=True, allow_nan=False)
        j["mac"] = hmac.new(key, f.stem.encode() + b"\n" + body.encode(), hashlib.sha256).hexdigest()
        f.write_text(json.dumps(j))
    fourth = CliRunner().invoke(app, args)
    assert [w["bytes"]["unfused"] for w in json.loads(fourth.stdout)["workloads"]] == [12345.0, 12345.0]
