"""Where the worker's guard checks spend their time, per component (one worker).

Two halves, each component timed ``--n`` times and reported as its median in milliseconds:

- **worker side**: a :class:`~solbench.harness.worker.Worker` built in this process as the
  worker process builds itself (the same methods its ``guards`` handler and every call run):
  the snapshot check (``guards.verify_snapshot``), the interposition state (mode stacks,
  hooks, TLS dispatch keys), the dispatcher guard's check after a workload (``full``) and after
  a call (the operators the worker runs itself), the backend flags; and the two totals the
  worker really runs: ``_interposition(full=True)`` (after each workload) and
  ``_interposition()`` (after each call);
- **parent side**: a real sandboxed worker (``WorkerHandle``) with no candidate in it: the
  parent's read of its guarded names in its memory (``memguard_findings``), the ``guards``
  request's round trip (the worker's whole check plus the messaging), the process check
  (``/proc`` children and strays) and the whole ``guard_findings`` the evaluator runs twice per
  workload (after the correctness rounds and after the timed blocks).

Usage (any tree: the worker follows the imported solbench)::

    PYTHONPATH=$PWD/src python bench/guard_cost.py --device cpu --n 15 \\
        --out bench/results/guard_cost_cpu
    python bench/guard_cost.py --device cuda --n 15 --out $OUT/guard_cost_h100

Writes OUT.json and OUT.md. Every step runs under ``--step-timeout-s`` (SIGALRM) and prints as
it comes. Runs against an older solbench too (components it lacks are left out), so the same
script measures the code before and after a change (``--label``). ``--against REV`` adds a
paired A/B of the dispatcher guard alone in this one process: ``harness/guards.py`` of git
revision REV and of this tree, each building its baseline, then their checks alternated call by
call (the same load for both; medians and the median of the per-pair ratio)::

    PYTHONPATH=$PWD/src python bench/guard_cost.py --device cpu --against fbd8360 --no-parent

(Where the git history is not at hand, ``--against FILE`` takes a copy of that revision's
guards.py: ``git show fbd8360:src/solbench/harness/guards.py > guards_before.py``.)

``--e2e K`` adds a real evaluation: the reference of a small relu problem as its own candidate
on K workloads in one worker (``solbench.harness.evaluate``), and prints per workload (the
first, which pays the worker's start, left out) the median of the trace's guard phases
(``correctness.guards``, ``guards_after_timing``, ``timing.guards``) and of its whole
``phases_s`` sum. ``--e2e-n`` sets the elements of x (default 1M, 4 MB).
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace


class StepTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise StepTimeout()


def timed(fn, n: int, warm: int = 1) -> list[float]:
    """``fn`` run ``warm`` times untimed, then ``n`` times; the wall milliseconds of each."""
    for _ in range(warm):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=15, help="timed repetitions per component")
    ap.add_argument("--out", type=Path, default=None, help="OUT.json and OUT.md are written")
    ap.add_argument("--label", default="", help="a name for this code (e.g. before / after)")
    ap.add_argument("--step-timeout-s", type=int, default=120)
    ap.add_argument("--no-parent", action="store_true", help="worker side only")
    ap.add_argument("--e2e", type=int, default=0, metavar="K",
                    help="also evaluate a relu reference as its own candidate on K workloads")
    ap.add_argument("--e2e-n", type=int, default=1 << 20)
    ap.add_argument("--memguard-against", default=None, metavar="REV",
                    help="git revision (or a file holding that revision's harness/memguard.py) whose "
                         "parent-side memory read is A/B-timed against this tree's on the real worker")
    ap.add_argument("--against", default=None, metavar="REV",
                    help="git revision (or a file holding that revision's harness/guards.py) whose "
                         "DispatchGuard is A/B-timed against this tree's")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)

    import torch

    import solbench
    from solbench.harness import guards, protocol
    from solbench.harness.worker import Worker

    rows: list[dict] = []
    mab = None

    def step(side: str, name: str, fn, note: str = "") -> None:
        signal.alarm(args.step_timeout_s)
        try:
            ms = timed(fn, args.n)
        except StepTimeout:
            print(f"{side:6} {name:44} timed out after {args.step_timeout_s} s", flush=True)
            return
        except Exception as e:  # noqa: BLE001 - a component this version lacks
            print(f"{side:6} {name:44} failed: {type(e).__name__}: {e}"[:200], flush=True)
            return
        finally:
            signal.alarm(0)
        r = {"side": side, "component": name, "median_ms": statistics.median(ms),
             "min_ms": min(ms), "max_ms": max(ms), "n": len(ms), "note": note}
        rows.append(r)
        print(f"{side:6} {name:44} {r['median_ms']:9.3f} ms (min {r['min_ms']:.3f}, max {r['max_ms']:.3f})",
              flush=True)

    print(f"solbench {Path(solbench.__file__).parent}  torch {torch.__version__}  device {args.device}  "
          f"label {args.label!r}", flush=True)
    signal.alarm(args.step_timeout_s)
    t = time.perf_counter()
    w = Worker(None, args.device)
    signal.alarm(0)
    print(f"worker object built in {time.perf_counter() - t:.3f} s "
          f"(dispatcher baseline included)", flush=True)
    d = w.dispatch
    covered = len(getattr(d, "_base", {}) or getattr(d, "ops", {}) or ())
    step("worker", "snapshot (verify_snapshot)", lambda: guards.verify_snapshot(w.snapshot, w._harness_fns))
    step("worker", "interposition state", lambda: Worker._interposition_state(w))
    step("worker", "dispatcher, after a workload (full)", lambda: d.changes(full=True),
         note=f"{covered} operators")
    step("worker", "dispatcher, after a call", lambda: d.changes())
    from solbench.harness.worker import _backend_flags

    step("worker", "backend flags", _backend_flags)
    step("worker", "interposition(full=True) total", lambda: Worker._interposition(w, full=True))
    step("worker", "interposition() total (per call)", lambda: Worker._interposition(w))
    step("worker", "guards handler total", lambda: Worker._on_guards(w, protocol.Guards()))
    assert Worker._interposition(w, full=True) == [], "a clean worker must report nothing"

    if not args.no_parent:
        from solbench.harness.evidence import guard_findings, memguard_baseline, memguard_findings
        from solbench.harness.process import WorkerHandle, stray_children

        signal.alarm(args.step_timeout_s)
        t = time.perf_counter()
        h = WorkerHandle(args.device)
        memguard_baseline(h)
        signal.alarm(0)
        print(f"real worker {h.pid} started in {time.perf_counter() - t:.2f} s; "
              f"parent's memory read: {'on' if h.memguard else h.memguard_note}", flush=True)
        h.base_kids = set()
        try:
            run = SimpleNamespace(h=h, findings=[], flags0=None, truth_errors=[])
            step("parent", "memory read of guarded names (memguard)", lambda: memguard_findings(run, "bench"))
            step("parent", "guards request round trip",
                 lambda: protocol.request(h, protocol.Guards(), timeout_s=60))
            step("parent", "process check (children, strays)",
                 lambda: guards.unexplained_children(h.pid, set()) + stray_children())
            step("parent", "ping round trip (messaging alone)",
                 lambda: protocol.request(h, protocol.Ping(), timeout_s=60))
            step("parent", "guard_findings total (x2 per workload)", lambda: guard_findings(run, "bench"))
            assert not run.findings, run.findings
            if args.memguard_against and h.memguard:
                mab = memguard_against(args.memguard_against, h, args.n)
        finally:
            h.close()

    ab = None
    if args.against:
        signal.alarm(args.step_timeout_s * 4)
        try:
            ab = against(args.against, guards, args.n)
        except StepTimeout:
            print(f"A/B against {args.against} timed out", flush=True)
        except Exception as e:  # noqa: BLE001 - no git here, an unknown revision
            print(f"A/B against {args.against} not run: {type(e).__name__}: {e}"[:300], flush=True)
        finally:
            signal.alarm(0)

    e2e = None
    if args.e2e:
        signal.alarm(args.step_timeout_s * 5)
        try:
            e2e = end_to_end(args.device, args.e2e, args.e2e_n)
        except StepTimeout:
            print("end-to-end evaluation timed out", flush=True)
        finally:
            signal.alarm(0)

    med = {(r["side"], r["component"]): r["median_ms"] for r in rows}
    per_wl = med.get(("parent", "guard_findings total (x2 per workload)"))
    summary = {"label": args.label, "device": args.device, "torch": torch.__version__,
               "python": platform.python_version(), "host": platform.node(), "n": args.n,
               "operators_covered": covered, "rows": rows, "ab": ab, "memguard_ab": mab, "e2e": e2e,
               "guard_findings_per_workload_ms": 2 * per_wl if per_wl is not None else None,
               "command": " ".join(["python", "bench/guard_cost.py", *sys.argv[1:]])}
    if per_wl is not None:
        print(f"per workload (two guard_findings): {2 * per_wl:.1f} ms", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
        lines = [f"`{summary['command']}`", "",
                 f"torch {torch.__version__}, device {args.device}, {args.n} repetitions, "
                 f"{covered} operators covered, label {args.label!r}", "",
                 "| side | component | median ms | min | max |", "|---|---|---|---|---|"]
        lines += [f"| {r['side']} | {r['component']} | {r['median_ms']:.3f} | {r['min_ms']:.3f} | "
                  f"{r['max_ms']:.3f} |" for r in rows]
        if per_wl is not None:
            lines += ["", f"per workload (two guard_findings): {2 * per_wl:.1f} ms"]
        if e2e:
            lines += ["", f"evaluation of a relu reference as candidate ({e2e['n']} elements), "
                          f"{e2e['workloads']} workloads, first left out; median s per workload:", "",
                      "| phase | median s | min | max |", "|---|---|---|---|"]
            lines += [f"| {k} | {v['median']:.4f} | {v['min']:.4f} | {v['max']:.4f} |"
                      for k, v in e2e["phases"].items()]
        if ab:
            lines += ["", f"A/B of the dispatcher guard, {ab['rev']} (A) against this tree (B), "
                          f"alternated, {ab['n']} pairs:", "",
                      "| check | A median ms | B median ms | median B/A |", "|---|---|---|---|"]
            lines += [f"| {k} | {v['a_ms']:.3f} | {v['b_ms']:.3f} | {v['ratio']:.3f} |"
                      for k, v in ab["checks"].items()]
        if mab:
            lines += ["", f"A/B of the parent's memory read (memguard), {mab['rev']} (A) against this tree (B), "
                          f"alternated on one real worker, {mab['n']} pairs: A {mab['a_ms']:.3f} ms "
                          f"({mab['a_reads']} reads), B {mab['b_ms']:.3f} ms ({mab['b_reads']} reads), "
                          f"median B/A {mab['ratio']:.3f}"]
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


#: the guard phases of a trace (evaluator.py, timed.py) and what they hold
E2E_PHASES = ("correctness.guards", "guards_after_timing", "timing.guards", "ref_timing.guards")


def end_to_end(device: str, k: int, n: int) -> dict:
    """Evaluate ``y = relu(x)`` (float32, ``n`` elements), its reference as its candidate, on
    ``k`` identical workloads in one worker; per-phase medians over workloads 2..k."""
    import tempfile

    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import Solution, load_problem

    ref = "import torch\n\ndef run(x):\n    return torch.relu(x)\n"
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "relu_guard_cost"
        root.mkdir()
        (root / "definition.json").write_text(json.dumps({
            "name": "relu_guard_cost", "axes": {"n": {"type": "var"}},
            "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": ref}))
        (root / "workload.jsonl").write_text("".join(
            json.dumps({"uuid": f"w{i}", "axes": {"n": n}, "inputs": {"x": {"type": "random"}}}) + "\n"
            for i in range(k)))
        prob = load_problem(root)
        sol = Solution.model_validate({
            "name": "relu_ref", "definition": prob.name, "author": "bench",
            "spec": {"languages": ["pytorch"], "entry_point": "cand.py::run",
                     "destination_passing_style": False},
            "sources": [{"path": "cand.py", "content": ref}]})
        t = time.perf_counter()
        stamps: list[float] = []
        traces = evaluate(prob, sol, EvalConfig(device=device),
                          on_trace=lambda tr: stamps.append(time.perf_counter()))
        wall = time.perf_counter() - t
    statuses = sorted({tr.evaluation.status.value for tr in traces})
    if statuses != ["PASSED"]:  # the figures would describe a failure path, not the steady one
        raise RuntimeError(f"the reference as candidate did not pass: {statuses}: "
                           f"{(traces[0].evaluation.log or '')[-500:]}")
    per: dict[str, list[float]] = {}
    for tr in traces[1:]:
        ph = tr.evaluation.phases_s or {}
        for key in E2E_PHASES:
            per.setdefault(key, []).append(ph.get(key, 0.0))
        per.setdefault("guards, all four", []).append(sum(ph.get(key, 0.0) for key in E2E_PHASES))
    # a workload's whole wall time: from the previous trace to its own
    per["wall per workload"] = [b - a for a, b in zip(stamps, stamps[1:])]
    out = {"workloads": k, "n": n, "statuses": statuses, "wall_s": wall,
           "phases": {key: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                      for key, v in per.items()}}
    print(f"e2e: {k} workloads in {wall:.1f} s, statuses {statuses}", flush=True)
    for key, v in out["phases"].items():
        print(f"e2e    {key:44} {v['median'] * 1e3:9.1f} ms per workload (min {v['min'] * 1e3:.1f}, "
              f"max {v['max'] * 1e3:.1f})", flush=True)
    return out


def _module_of(rev: str, rel: str, name: str):
    """``src/solbench/harness/<rel>`` of git revision ``rev`` (or the file ``rev``), loaded as
    ``solbench.harness.<name>`` (a sibling of this tree's: its relative imports resolve here)."""
    import importlib.util
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    if Path(rev).is_file():
        src = Path(rev).read_text()
    else:
        src = subprocess.run(["git", "-C", str(root), "show", f"{rev}:src/solbench/harness/{rel}"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / f"{name}.py"
        f.write_text(src)
        spec = importlib.util.spec_from_file_location(f"solbench.harness.{name}", f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def memguard_against(rev: str, h, n: int) -> dict:
    """Paired A/B of the parent's read of a real worker's guarded names: ``memguard.changed``
    + ``instances_changed`` of revision ``rev`` (A) and of this tree (B), alternated ``n``
    times on the same worker and ``/proc/<pid>/mem`` fd; both must find nothing. Also counts
    the ``pread`` calls of one read of each."""
    import os

    from solbench.harness import memguard
    from solbench.harness.peek import open_worker_memory

    old = _module_of(rev, "memguard.py", "_memguard_ab")
    fd = open_worker_memory(h.pid)
    insts = getattr(h, "memguard_instances", None) or []
    try:
        def read(m):
            return m.changed(fd, h.memguard) + m.instances_changed(fd, insts)

        reads = {}
        for label, m in (("a", old), ("b", memguard)):
            count = [0]
            real = m.os.pread

            def counting(f, k, off, _real=real, _count=count):
                _count[0] += 1
                return _real(f, k, off)

            m.os.pread = counting
            try:
                assert read(m) == [], "a worker with no candidate must read unchanged"
            finally:
                m.os.pread = real
            reads[label] = count[0]
        a, b = [], []
        for i in range(n + 1):
            for m, acc in ((old, a), (memguard, b)) if i % 2 else ((memguard, b), (old, a)):
                t = time.perf_counter()
                assert read(m) == []
                acc.append((time.perf_counter() - t) * 1e3)
        a, b = a[1:], b[1:]
    finally:
        os.close(fd)
    out = {"rev": rev, "n": n, "a_ms": statistics.median(a), "b_ms": statistics.median(b),
           "ratio": statistics.median(y / x for x, y in zip(a, b)), "a_reads": reads["a"], "b_reads": reads["b"]}
    print(f"A/B memguard {rev} vs this tree: A {out['a_ms']:.3f} ms ({reads['a']} reads)  "
          f"B {out['b_ms']:.3f} ms ({reads['b']} reads)  median B/A {out['ratio']:.3f}", flush=True)
    return out


def against(rev: str, guards, n: int) -> dict:
    """Paired A/B of ``DispatchGuard``: ``harness/guards.py`` of git revision ``rev`` (or the file
    ``rev``) loaded as a sibling module of this tree's (its relative imports resolve here),
    both guards built in this process, their ``full`` and per-call checks alternated ``n``
    times each."""
    old = _module_of(rev, "guards.py", "_guards_ab")
    out: dict = {"rev": rev, "n": n, "checks": {}}
    t = time.perf_counter()
    ga = old.DispatchGuard()
    t_a = time.perf_counter() - t
    t = time.perf_counter()
    gb = guards.DispatchGuard()
    t_b = time.perf_counter() - t
    out["baseline_s"] = {"a": t_a, "b": t_b}
    print(f"A/B {rev} vs this tree: baseline {t_a * 1e3:.1f} ms vs {t_b * 1e3:.1f} ms", flush=True)
    for name, call in (("after a workload (full)", lambda g: g.changes(full=True)),
                       ("after a call", lambda g: g.changes())):
        a, b = [], []
        for i in range(n + 1):
            for g, acc in ((ga, a), (gb, b)) if i % 2 else ((gb, b), (ga, a)):
                t = time.perf_counter()
                assert call(g) == [], "a clean process must report nothing"
                acc.append((time.perf_counter() - t) * 1e3)
        a, b = a[1:], b[1:]  # the first of each: warm-up
        r = {"a_ms": statistics.median(a), "b_ms": statistics.median(b),
             "ratio": statistics.median(y / x for x, y in zip(a, b))}
        out["checks"][name] = r
        print(f"A/B {name:26} A {r['a_ms']:8.3f} ms  B {r['b_ms']:8.3f} ms  median B/A {r['ratio']:.3f}",
              flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
