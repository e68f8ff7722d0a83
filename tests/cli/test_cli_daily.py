"""Issue 18, daily use of the CLI: one test (or a few) per numbered point of the issue.

Each runs the real command (CliRunner in-process, or a subprocess where the entry point,
streams or signals matter) on tiny problems written here; expected values are worked out
by hand in the comments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from solbench.cli import app
from solbench.spec import Status, Trace

SRC = Path(__file__).resolve().parents[2] / "src"

DEF = {
    "name": "add2",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y):\n    return x + y\n",
}
# declared bytes (x, y, out float32): 64 -> 768, 1000 -> 12000, 16 -> 192
UUIDS = ["a1000000-0000-0000-0000-000000000000", "b2000000-0000-0000-0000-000000000000",
         "c3000000-0000-0000-0000-000000000000"]
SIZES = [64, 1000, 16]
HANG_AT_1000 = ("import torch\n\ndef run(x, y):\n    if x.numel() == 1000:\n        while True:\n"
                "            pass\n    return x + y\n")
# names its thread (PR_SET_NAME, /proc/<pid>/task/<tid>/comm) before spinning, so the test
# knows the candidate's own code is in its infinite loop, not the worker still starting
SPIN = ("import ctypes\n\ndef run(x, y):\n    ctypes.CDLL(None).prctl(15, b'cand-spinning', 0, 0, 0)\n"
        "    while True:\n        pass\n")


def _problem(d: Path, name: str = "add2") -> Path:
    p = d / name
    p.mkdir(parents=True)
    (p / "definition.json").write_text(json.dumps(dict(DEF, name=name)))
    (p / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": u, "axes": {"n": n}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}})
        + "\n" for u, n in zip(UUIDS, SIZES)))
    return p


@pytest.fixture()
def prob(tmp_path):
    return _problem(tmp_path)


def _env(tmp_path) -> dict:
    env = {**os.environ, "SOLBENCH_CACHE": str(tmp_path / "cache")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [x for x in [env.get("PYTHONPATH")] if x])
    env.pop("SOLBENCH_RUN", None)
    return env


def _cli(args, tmp_path, **kw) -> subprocess.Popen:
    """The real entry point (``solbench.cli.main``) with stdout/stderr to pipes (no tty)."""
    entry = "import sys; from solbench.cli import main; sys.argv[0] = 'solbench'; main()"
    return subprocess.Popen([sys.executable, "-c", entry, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path), **kw)


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    for c in map(int, f.read().split()):
                        if c not in out:
                            out.add(c)
                            todo.append(c)
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _workers(pids) -> list[int]:
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"solbench.harness.worker" in f.read():
                    out.append(p)
        except OSError:
            pass
    return out


def _reap(pids: list[int]) -> list[int]:
    """SIGKILL what a failing run left behind (so a red test leaves no spinning process);
    returns ``pids`` for the assertion."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return pids


def _one_error_line(r) -> str:
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1, r.output
    assert err[0].startswith("error: ") and "Traceback" not in r.output
    return err[0]


# --- 1 and 2: progress off a terminal, traces as each workload finishes, SIGTERM ---------
@pytest.mark.slow
def test_1_2_progress_lines_traces_appended_then_sigterm_leaves_no_process(prob, tmp_path):
    cand = tmp_path / "hang.py"
    cand.write_text(HANG_AT_1000)
    out = tmp_path / "t.jsonl"
    proc = _cli(["eval", str(prob), "-s", str(cand), "--device", "cpu", "-w", "0,1", "--iters", "3",
                 "--rounds", "2", "-o", str(out)], tmp_path)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        # workload 0 finished and is on disk while the process is still busy with workload 1
        lines = out.read_text().splitlines()
        assert len(lines) == 1 and proc.poll() is None
        assert Trace.from_json_line(lines[0]).workload.uuid == UUIDS[0]
        time.sleep(3)  # the candidate's worker is now spinning in workload 1
        kids = _descendants(proc.pid)
        assert _workers(kids), "no worker was running"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            kids = _descendants(proc.pid)
            proc.kill()
            _reap(list(kids))
    assert proc.returncode == 128 + signal.SIGTERM
    time.sleep(1)
    left = _reap([p for p in kids if _alive(p)])
    assert left == [], "processes outlived solbench after SIGTERM"
    # off a terminal: a header, then one line per finished workload with status, latency,
    # speedup and an ETA (1 of 2 done: ETA = elapsed)
    assert "add2 / hang: 2 workload(s) to evaluate" in err
    first = [x for x in err.splitlines() if x.startswith("[1/2]")]
    assert len(first) == 1 and UUIDS[0] in first[0] and "PASSED" in first[0]
    assert "latency" in first[0] and "speedup" in first[0] and "ETA" in first[0]
    assert Trace.from_json_line(out.read_text().splitlines()[0]).evaluation.status == Status.PASSED


@pytest.mark.slow
def test_2_ctrl_c_says_so_at_once_and_leaves_no_process(prob, tmp_path):
    """SIGINT (Ctrl-C) while a candidate spins: a line on stderr, exit 130, no process left,
    and no wait for the spinning worker (before, 7.5 s of silence)."""
    cand = tmp_path / "spin.py"
    cand.write_text(SPIN)
    proc = _cli(["eval", str(prob), "-s", str(cand), "--device", "cpu", "-w", "a1"], tmp_path,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not [
                p for p in _workers(_descendants(proc.pid)) if "cand-spinning" in _comms(p)]:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        kids = _descendants(proc.pid)
        assert _workers(kids), "no worker was running"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            kids = _descendants(proc.pid)
            proc.kill()
            _reap(list(kids))
    assert proc.returncode == 130, err
    assert "solbench: interrupted: stopping the workers" in err and "Traceback" not in err
    time.sleep(1)
    left = _reap([p for p in kids if _alive(p)])
    assert left == [], "processes outlived solbench after SIGINT"
    assert took < 30, took  # generous: the point is not waiting out a spinning call


@pytest.mark.slow
def test_2_sigkill_of_eval_leaves_no_worker_running(prob, tmp_path):
    cand = tmp_path / "spin.py"
    cand.write_text(SPIN)
    proc = _cli(["eval", str(prob), "-s", str(cand), "--device", "cpu", "-w", "a1"], tmp_path)
    try:
        deadline = time.monotonic() + 300
        spinning = []
        while time.monotonic() < deadline and not spinning:
            assert proc.poll() is None, proc.communicate()
            spinning = [p for p in _workers(_descendants(proc.pid)) if "cand-spinning" in _comms(p)]
            time.sleep(0.5)
        assert spinning, "the candidate never started"
        time.sleep(2)
        kids = _descendants(proc.pid)
        proc.kill()  # SIGKILL: nothing in the process can react
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            stray = _descendants(proc.pid)
            proc.kill()
            _reap(list(stray))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in kids):
        time.sleep(0.2)
    left = _reap([p for p in kids if _alive(p)])
    assert left == [], "a worker outlived a SIGKILLed solbench"


def _comms(pid: int) -> set[str]:
    out = set()
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                out.add(f.read().strip())
    except OSError:
        pass
    return out


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def test_1_progress_reporter_lines_and_eta(capsys):
    """Off a terminal, EvalProgress prints one flushed line per trace; ETA = mean time per
    finished workload x workloads left."""
    from solbench.cli.common import EvalProgress

    t = _trace("w-0001", cand=[1.0, 1.0, 1.0, 1.0], ref=[2.0, 2.0, 2.0, 2.0])
    with EvalProgress(3, "p / s", tty=False) as prog:
        prog.t0 -= 10.0  # 10 s spent on the first workload
        prog.done(t)
        assert 19 <= prog.eta_s() <= 21  # 10 s per workload x 2 left
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "p / s: 3 workload(s) to evaluate"
    assert err[1].startswith("[1/3] p / s w-0001 PASSED latency 1 ms speedup 2x") and "ETA 20s" in err[1]


# --- 3: one meaning for workload selection ------------------------------------------------
def test_3_workload_selection_one_meaning(prob):
    from solbench.cli.common import choose_workloads
    from solbench.errors import SpecError
    from solbench.spec import load_problem

    p = load_problem(prob)
    ids = lambda ws: [w.uuid for w in ws]  # noqa: E731
    assert ids(choose_workloads(p, "0")) == [UUIDS[0]]          # an index, not "first 0"
    assert ids(choose_workloads(p, "0,")) == [UUIDS[0]]
    assert ids(choose_workloads(p, "2,0")) == [UUIDS[2], UUIDS[0]]
    assert ids(choose_workloads(p, "0-1")) == UUIDS[:2]
    assert ids(choose_workloads(p, "b2")) == [UUIDS[1]]         # unique uuid prefix
    assert ids(choose_workloads(p, UUIDS[2] + ",2")) == [UUIDS[2]]  # no repeats
    # --limit: the N smallest by declared bytes (192 < 768 < 12000), in file order
    assert ids(choose_workloads(p, None, limit=2)) == [UUIDS[0], UUIDS[2]]
    assert ids(choose_workloads(p, None, limit=1)) == [UUIDS[2]]
    assert ids(choose_workloads(p, None, max_bytes=1000)) == [UUIDS[0], UUIDS[2]]
    for spec, msg in (("3", "index 3 is out of range: the problem has 3 workloads (0-2)"),
                      ("99", "index 99 is out of range"), ("1-5", "range '1-5' is out of range"),
                      ("zzz", "no workload has uuid 'zzz'"), (",", "names no workload")):
        with pytest.raises(SpecError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            choose_workloads(p, spec)
    with pytest.raises(SpecError, match="no workload fits in 100 bytes"):
        choose_workloads(p, None, max_bytes=100)


def test_3_eval_sol_audit_share_the_meaning(prob, tmp_path):
    r = CliRunner().invoke(app, ["eval", str(prob), "-w", "99", "--device", "cpu", "-o", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 2
    assert "--workloads: index 99 is out of range: the problem has 3 workloads (0-2)" in _one_error_line(r)
    assert not (tmp_path / "t.jsonl").exists()
    r = CliRunner().invoke(app, ["eval", str(prob), "-w", "0", "--device", "cpu", "--no-timing",
                                 "--rounds", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert [t["workload"]["uuid"] for t in json.loads(r.stdout)] == [UUIDS[0]]
    r = CliRunner().invoke(app, ["sol", str(prob), "-w", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert [(w["uuid"], w["index"]) for w in json.loads(r.stdout)["workloads"]] == [(UUIDS[2], 2)]
    r = CliRunner().invoke(app, ["sol", str(prob), "--limit", "1", "--json"])
    assert [w["uuid"] for w in json.loads(r.stdout)["workloads"]] == [UUIDS[2]]
    # audit: "--workloads 1" is workload 1 (it used to mean "the 1 smallest")
    r = CliRunner().invoke(app, ["audit", str(prob), "--workloads", "1", "--json", "--no-downgrade"])
    assert r.exit_code == 0, r.output
    assert list(json.loads(r.stdout)["details"]["workloads"]) == [UUIDS[1]]


# --- 4: argument validation before any work, one-line errors ------------------------------
@pytest.mark.parametrize("args,needle", [
    (["--hardware", "Z9000"], "--hardware: "),
    (["--sol-model", "fancy"], "--sol-model: unknown model 'fancy' (refined or solar)"),
    (["--device", "tpu"], "--device: 'tpu' is not supported (cpu, cuda or cuda:N)"),
    (["--solution", "/nonexistent/s.py"], "--solution: /nonexistent/s.py: no such file"),
    (["--max-bytes", "lots"], "--max-bytes: 'lots' is not a byte count"),
    (["--limit", "0"], "--limit: must be >= 1, got 0"),
])
def test_4_eval_rejects_bad_arguments_before_work(prob, tmp_path, args, needle):
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(app, ["eval", str(prob), "-o", str(out), *args])
    assert r.exit_code == 2, r.output
    assert needle in _one_error_line(r)
    assert not out.exists()


def test_4_messages_lose_pydantic_and_memory_prefixes(prob):
    from solbench.cli.common import clean_message

    assert clean_message("<memory>: --limit: must be >= 1") == "--limit: must be >= 1"
    assert clean_message("f.json: spec: Value error, bad entry\nmore") == "f.json: spec: bad entry; more"
    r = CliRunner().invoke(app, ["sol", str(prob), "--limit", "0"])
    assert r.exit_code == 2 and _one_error_line(r) == "error: --limit: must be >= 1, got 0"


def test_4_allocation_failure_is_a_recorded_status(prob, monkeypatch):
    from solbench.harness import shm

    def no_memory(self, shape, stride, dtype):
        raise RuntimeError("unable to mmap 4000000000000 bytes: Cannot allocate memory (12)")

    monkeypatch.setattr(shm.ShmArena, "tensor", no_memory)
    r = CliRunner().invoke(app, ["eval", str(prob), "-w", "0", "--device", "cpu", "--no-timing", "--json"])
    assert r.exit_code == 1, r.output
    (t,) = json.loads(r.stdout)
    assert t["evaluation"]["status"] == "INVALID_REFERENCE"
    assert "could not allocate the workload's buffers" in t["evaluation"]["log"]
    assert "Cannot allocate memory" in t["evaluation"]["log"]


# --- 5: the noise floor wherever a speedup is printed -------------------------------------
def _trace(uuid, cand=None, ref=None, status=Status.PASSED, log="", findings=(), device="cpu", axes=None):
    from solbench.spec import Workload
    from solbench.spec.trace import Correctness, Environment, Evaluation, Finding, Performance, TimingStats

    def ts(xs):
        if xs is None:
            return None
        s = sorted(xs)
        return TimingStats(method="perf_counter", median_ms=s[len(s) // 2], iqr_ms=None, min_ms=s[0],
                           mean_ms=sum(s) / len(s), n_samples=len(s), warmup=1, cold_l2=True, samples_ms=list(xs))

    perf = None
    if cand is not None and ref is not None:
        c, r = sorted(cand)[len(cand) // 2], sorted(ref)[len(ref) // 2]
        perf = Performance(latency_ms=c, reference_latency_ms=r, speedup_factor=r / c)
    corr = (Correctness() if status == Status.PASSED else
            Correctness(max_absolute_error=1.0, max_relative_error=1.0)
            if status == Status.INCORRECT_NUMERICAL else None)
    ev = Evaluation(status=status, log=log, performance=perf, correctness=corr, environment=Environment(hardware="CPU"),
                    timing=ts(cand), reference_timing=ts(ref), device=device,
                    findings=[Finding(check=f, severity="advisory", message="m") for f in findings])
    return Trace(definition="p", solution="s", workload=Workload(uuid=uuid, axes=axes or {"n": 1}, inputs={}),
                 evaluation=ev)


def _render(table) -> str:
    c = Console(width=400, record=True, file=open(os.devnull, "w"))
    c.print(table)
    return c.export_text()


def test_5_speedup_within_noise_is_marked():
    from solbench.report.tables import speedup_interval, speedup_text, trace_table

    # reference [0.9, 1.0, 1.05, 1.1]: Q1 = 0.975, Q3 = 1.0625 (linear interpolation);
    # candidate [0.98, 1.0, 1.02, 1.1]: Q1 = 0.995, Q3 = 1.04 -> overlap, speedup ~1
    same = _trace("u-same", cand=[0.98, 1.0, 1.02, 1.1], ref=[0.9, 1.0, 1.05, 1.1])
    lo, hi = speedup_interval(same)
    assert lo == pytest.approx(0.975 / 1.04) and hi == pytest.approx(1.0625 / 0.995)
    assert speedup_text(same).endswith(" ~")
    # candidate [0.49, 0.5, 0.51, 0.52] vs the same reference: Q3 0.5125 < ref Q1: a real 2x
    fast = _trace("u-fast", cand=[0.49, 0.5, 0.51, 0.52], ref=[0.9, 1.0, 1.05, 1.1])
    assert speedup_text(fast) == f"{1.05 / 0.51:.3g}x"
    shaky = _trace("u-shaky", cand=[0.49, 0.5, 0.51, 0.52], ref=[0.9, 1.0, 1.05, 1.1], findings=["timing_unstable"])
    assert speedup_text(shaky).endswith(" !")
    text = _render(trace_table([same, fast, shaky]))
    assert "~ : speedup within this run's timing noise" in text and "timing_unstable" in text
    assert "no SOL on CPU" in text  # the demo's SOL column says why it is empty


def test_5_run_table_marks_noisy_geomean():
    from solbench.cli.suite import _print_tables
    from solbench.report.summary import summarize, unit_results
    from solbench.cli import common

    same = _trace("u-same", cand=[0.98, 1.0, 1.02, 1.1], ref=[0.9, 1.0, 1.05, 1.1])
    rec = Console(width=300, record=True, file=open(os.devnull, "w"))
    old = common.console
    import solbench.cli.suite as suite_mod

    suite_mod.console = rec
    try:
        _print_tables(summarize([same]), unit_results([same]), [same])
    finally:
        suite_mod.console = old
    out = rec.export_text()
    # medians (upper middle of 4 samples): reference 1.05, candidate 1.02 -> 1.03x, inside noise
    assert f"{1.05 / 1.02:.3g}x ~" in out and "timing noise" in out
    # the summary says how many speedups the run cannot tell from 1.0 (its median and
    # fast_p figures do not)
    assert "1 ~ / 0 ! of 1" in out


# --- 6: validate never runs KernelBench code ----------------------------------------------
def test_6_validate_kernelbench_statically(tmp_path):
    sentinel = tmp_path / "ran"
    kb = tmp_path / "36_RMSNorm_.py"
    kb.write_text(f'''import torch
import torch.nn as nn
open({str(sentinel)!r}, "w").write("imported")

class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)

batch_size = 112
features = 64
dim1 = 512
dim2 = 512

def get_inputs():
    raise RuntimeError("get_inputs() was run")
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [features]
''')
    r = CliRunner().invoke(app, ["validate", str(kb)])
    assert r.exit_code == 0, r.output
    # 112 x 64 x 512 x 512 float32 = 7,516,192,768 bytes
    assert "arg0: 112x64x512x512 float32" in r.stdout and "7.52 GB" in r.stdout
    assert not sentinel.exists()
    bad = tmp_path / "bad_kb.py"
    bad.write_text("import torch\nclass Model:\n    def forward(self, x):\n        return x\n\ndef get_inputs():\n    return []\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 1 and f"{bad}: get_init_inputs: KernelBench problem file must define it" in r.stderr


# --- 7: baseline kinds write distinct files; run labels them ------------------------------
def test_7_baseline_eager_and_compile_distinct_files_and_labels(prob, tmp_path):
    from solbench.spec import load_problem
    from solbench.run.plan import candidate_files, load_candidate

    sols = tmp_path / "sols"
    r1 = CliRunner().invoke(app, ["baseline", str(prob), "--eager", "-o", str(sols)])
    r2 = CliRunner().invoke(app, ["baseline", str(prob), "--compile", "--backend", "eager", "-o", str(sols)])
    r3 = CliRunner().invoke(app, ["baseline", str(prob), "--compile", "-o", str(sols)])
    assert r1.exit_code == r2.exit_code == r3.exit_code == 0, r1.output + r2.output + r3.output
    # the layout `solbench run --solutions sols` takes: sols/<problem>/<label>.json
    names = sorted(p.name for p in (sols / "add2").iterdir())
    assert names == ["compile.json", "compile_eager.json", "eager.json"]
    p = load_problem(prob)
    labels = sorted(load_candidate(f, p).label for f in candidate_files(sols, p))
    assert labels == ["compile", "compile_eager", "eager"]


# --- 8: dataset runners --------------------------------------------------------------------
def test_8_kernelbench_matching_by_name_and_number(tmp_path):
    from solbench.cli.dataset import match_kernelbench

    l1, l2 = tmp_path / "KernelBench" / "level1", tmp_path / "KernelBench" / "level2"
    probs = [l1 / "19_ReLU.py", l1 / "36_RMSNorm_.py", l2 / "19_Conv_Act.py"]
    g = tmp_path / "gen"
    cands = [g / "36_RMSNorm_.py", g / "level_1_problem_19_sample_0_kernel.py",
             g / "level_2_problem_19_sample_1_kernel.py", g / "problem_36_x.py", g / "misc.py"]
    pairs, unmatched = match_kernelbench(probs, cands)
    assert pairs == {l1 / "36_RMSNorm_.py": [g / "36_RMSNorm_.py", g / "problem_36_x.py"],
                     l1 / "19_ReLU.py": [g / "level_1_problem_19_sample_0_kernel.py"],
                     l2 / "19_Conv_Act.py": [g / "level_2_problem_19_sample_1_kernel.py"]}
    assert unmatched == [g / "misc.py"]


@pytest.mark.slow
def test_8_run_dataset_subsets_limit_resume(tmp_path):
    root = tmp_path / "ds"
    a = _problem(root / "L1", "add_a")
    _problem(root / "L1", "add_b")   # no solution file: counted, skipped
    c = _problem(root / "L2", "add_c")
    sol = {"name": "torch_add", "definition": "add_a", "author": "t",
           "spec": {"languages": ["pytorch"], "entry_point": "m.py::run", "destination_passing_style": False},
           "sources": [{"path": "m.py", "content": "import torch\n\ndef run(x, y):\n    return torch.add(x, y)\n"}]}
    (a / "solution.json").write_text(json.dumps(sol))
    (c / "mine.json").write_text(json.dumps(dict(sol, definition="add_c")))
    out = tmp_path / "r.jsonl"
    base = ["run-dataset", str(root), "--workload-limit", "1", "--iters", "2", "--rounds", "1",
            "--device", "cpu", "-o", str(out)]
    r = CliRunner().invoke(app, base + ["--subset", "L1", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows["evaluated_now"] == 1  # add_a, its smallest workload (n=16)
    (t,) = [Trace.from_json_line(x) for x in out.read_text().splitlines()]
    assert (t.definition, t.workload.uuid, t.evaluation.status) == ("add_a", UUIDS[2], Status.PASSED)
    r = CliRunner().invoke(app, base + ["--subset", "L1", "--resume", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["evaluated_now"] == 0
    r = CliRunner().invoke(app, base + ["--subset", "L9"])
    assert r.exit_code == 2 and "--subset: " in _one_error_line(r) and "no subset L9" in r.stderr
    r = CliRunner().invoke(app, base + ["--subset", "L2", "--solution-name", "mine.json", "--resume", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["evaluated_now"] == 1


# --- 9: tables never cut information ------------------------------------------------------
def test_9_tables_show_ids_reasons_and_missing_data():
    from solbench.report.tables import trace_table

    ts = [_trace(f"linbwd-00{i}", status=Status.INCORRECT_NUMERICAL) for i in (1, 2, 3)]
    ts.append(_trace("cpp-build", status=Status.COMPILE_ERROR,
                     log="build of m.cpp failed\n[1/2] c++ -c m.cpp\nm.cpp:3:5: error: expected ';' before 'return'\nninja: build stopped"))
    ts.append(_trace("no-blob", status=Status.INVALID_REFERENCE,
                     log="inputs unavailable: /data/w.safetensors: blob not on disk"))
    ts.append(_trace("long-axes", status=Status.RUNTIME_ERROR, axes={f"axis_{i}": 1000 + i for i in range(8)},
                     log="worker output\nworker exited with code -11 (SIGSEGV) during call"))
    text = _render(trace_table(ts))
    for i in (1, 2, 3):
        assert f"linbwd-00{i}" in text
    assert "m.cpp:3:5: error: expected ';' before 'return'" in text
    assert "missing input data" in text and "/data/w.safetensors: blob not on disk" in text
    assert "axis_7=1007" in text and "worker exited with code -11 (SIGSEGV) during call" in text


# --- 10: startup, version, help, suites, profile figure and Kineto lines --------------------
def test_10_fast_paths_import_no_torch(tmp_path):
    code = ("import sys\nsys.argv = ['solbench'] + sys.argv[1:]\nfrom solbench.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('rc', e.code, 'torch' in sys.modules)\n")
    for args, rc in ((["--version"], 0), (["eval", str(tmp_path / "nonexist")], 2), (["eval", "--help"], 0)):
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                           env=_env(tmp_path), timeout=120)
        assert r.stdout.strip().splitlines()[-1] == f"rc {rc} False", (args, r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "solbench.cli", "--version"], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "solbench 0.1.0"
    r = subprocess.run([sys.executable, "-m", "solbench.cli", "eval", "x", "--bogus"], capture_output=True,
                       text=True, env=_env(tmp_path), timeout=120)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith("error: No such option: --bogus"), r.stderr


def test_10_help_flags_and_suites():
    r = subprocess.run([sys.executable, "-m", "solbench.cli", "eval", "-h"], capture_output=True,
                       text=True, env=_env(Path(os.devnull)), timeout=120)
    assert r.returncode == 0 and "--no-timing" in r.stdout and "<bool>" not in r.stdout, r.stdout
    r = CliRunner().invoke(app, ["suite", "list", "--json"])
    suites = {s["name"]: s for s in json.loads(r.stdout)["suites"]}
    assert Path(suites["l1"]["path"]).is_dir() and (Path(suites["l1"]["path"]) / "relu_fp32").is_dir()
    r = CliRunner().invoke(app, ["suite", "show", "l1", "--json"])
    assert r.exit_code == 0, r.output
    rows = {p["name"]: p for p in json.loads(r.stdout)["problems"]}
    assert rows["relu_fp32"]["workloads"] == 4 and len(rows) == suites["l1"]["problems"]
    r = CliRunner().invoke(app, ["suite", "show", "nope"])
    assert r.exit_code == 2 and "no suite 'nope'" in _one_error_line(r)


def test_10_profile_legend_clear_of_axis_label(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solbench.profile import figures
    from solbench.profile.classify import CLASSES

    rep = {"workload": "llama-135m", "mode": "infer", "scale": "tiny", "device_name": "CPU",
           "classes": {**{c: {"share_wall": 0.0} for c in CLASSES}, "gemm": {"share_wall": 0.3},
                       "attention": {"share_wall": 0.1}, "framework_native": {"share_wall": 0.5}},
           "addressable_fraction": {"strict_wall": 0.4, "loose_wall": 0.5}}
    captured = {}
    real_close = plt.close
    plt.close = lambda fig=None: captured.setdefault("fig", fig)
    try:
        figures.class_bars([rep], tmp_path / "c.png")
    finally:
        plt.close = real_close
    fig = captured["fig"]
    fig.canvas.draw()
    rend = fig.canvas.get_renderer()
    ax = fig.axes[0]
    label = ax.xaxis.label.get_window_extent(rend)
    legends = fig.legends or [ax.get_legend()]
    box = legends[0].get_window_extent(rend)
    assert not label.overlaps(box), (label, box)
    real_close(fig)


def test_10_no_kineto_usdt_lines(tmp_path):
    code = ("import sys\nsys.argv = ['solbench', '--version']\nfrom solbench.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import torch\nfrom torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU]):\n    torch.ones(3) + 1\nprint('profiled')\n")
    env = _env(tmp_path)
    env.pop("KINETO_LOG_LEVEL", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "profiled" in r.stdout and "USDT" not in r.stderr, r.stderr


def test_1_demo_streams_progress_and_traces(prob, tmp_path, monkeypatch):
    """The demo's loop with a stand-in job list and evaluation (its real run is minutes):
    each finished trace is appended and reported before the next job starts."""
    from solbench.demo import run as demo_run
    from solbench.demo.run import DemoJob
    from solbench.spec import load_problem, reference_solution
    import solbench.run.session as session

    p = load_problem(prob)
    jobs = [DemoJob(problem=p, solution=reference_solution(p), expect="PASSED", workloads=[UUIDS[0]])]
    monkeypatch.setattr(demo_run, "demo_jobs", lambda device: jobs)
    out = tmp_path / "demo.jsonl"
    seen = []

    def fake(problem, solution, cfg, on_trace=None, **kw):
        t = _trace(UUIDS[0], cand=[1.0, 1.0, 1.0], ref=[1.0, 1.0, 1.0])
        on_trace(t)
        seen.append(out.read_text().count("\n"))  # written before evaluate returned
        return [t]

    monkeypatch.setattr(session, "evaluate_and_score", fake)
    r = CliRunner().invoke(app, ["demo", "--device", "cpu", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert seen == [1] and "[1/1] add2 / " in r.stderr and "as expected" in r.stdout


def test_demo_counts_a_hostile_caught_only_by_its_check():
    """A hostile demo candidate that crashed or failed to build is not 'caught': only the
    statuses named for it count; honest jobs need every workload PASSED."""
    from solbench.demo.run import CAUGHT_BY, DemoJob

    hostile = DemoJob(problem=None, solution=None, expect="caught", workloads=[],
                      caught_by=CAUGHT_BY["softmax_timer_patch.py"])
    assert hostile.as_expected(["REWARD_HACK", "REWARD_HACK"])
    assert not hostile.as_expected(["COMPILE_ERROR"])
    assert not hostile.as_expected(["RUNTIME_ERROR", "REWARD_HACK"])
    assert not hostile.as_expected([])
    honest = DemoJob(problem=None, solution=None, expect="PASSED", workloads=[])
    assert honest.as_expected(["PASSED"]) and not honest.as_expected(["PASSED", "TIMEOUT"])


def test_4_a_hardware_typo_fails_before_torch_is_imported(tmp_path):
    """``--hardware`` is checked before the device (whose check imports torch, seconds beside
    the early workers' own imports): a typo is one line and no torch import."""
    code = ("import sys\nfrom solbench.cli import main\n"
            "sys.argv = ['solbench', 'eval', 'l1/relu_fp32', '--device', 'cpu', '--hardware', 'Z9000']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code, 'torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    assert r.stdout.split() == ["exit", "2", "False"], (r.stdout, r.stderr[-500:])
    assert "--hardware: unknown hardware 'Z9000'" in r.stderr
