"""Timing agreement (issue 31 goal 1): solbench's median beside a bare CUPTI span measured in a
plain process, for the reference of every dev problem (two workloads each) and every bundled
honest candidate (the hand-written Triton kernels of l1 and DLRM-Bench, examples/solutions).

For each (problem, solution, workload):

- ``solbench``: ``harness.Evaluator`` with the solution as the candidate (the reference itself
  for the reference rows), no reference timing, one correctness round: the median of the
  per-call all-stream CUPTI spans (``timing.median_ms``) and the kernel-sum median.
- ``bare``: a long-lived plain child process of this script (no harness worker, no sandbox, no
  seccomp, no guards, no torch.profiler unless cupti-python is missing) builds the same inputs
  (``solbench.inputs.make_inputs``, K sets at K addresses, a new set per call), loads the same
  callable (``harness.build.load_entry`` only imports the solution's module), and per call:
  writes the same L2 flush (2x the device's L2, one fill), synchronises, reads the CUPTI clock,
  calls, synchronises, reads it again; the call is every kernel / memcpy / memset whose start
  lies between the two readings (cupti-python's activity API: CONCURRENT_KERNEL, MEMCPY,
  MEMSET; ``--api-records`` adds RUNTIME and DRIVER, as SOL-ExecBench's CUPTI timer enables).
  Without cupti-python it falls back to torch.profiler with CUDA activity only, the flush on a
  stream of its own delimiting the calls, and says so in every row (``bare_method``).

Per row: both medians (ms), both kernel sums, the ratio solbench / bare, ``ok`` (ratio within
0.98-1.02, or within 1 us when the bare span is under 50 us), and the launch-gap figure of each
side (span - kernel sum, ms: the host's time between launches inside the span). A table line
is printed as each row finishes; OUT/timing_agreement.json is rewritten after every problem.

GPU (lead; about 4-5 min on one H100 for the dev references and bundled candidates; the
data root is an argument because the lead carries the dataset):
    python bench/timing_agreement.py --data shared/datasets/sol-execbench-dev --out $OUT/agree --budget-s 270
CPU plumbing check (perf_counter stands in for CUPTI; a check of the script, not a figure):
    PYTHONPATH=src python bench/timing_agreement.py --device cpu --data ../shared/datasets/sol-execbench-dev \
        --only L1/025 --no-candidates --out /tmp/agree
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: goal: ratio within this band, or |difference| <= ABS_US when the bare span is under SHORT_MS
BAND = (0.98, 1.02)
ABS_US = 1.0
SHORT_MS = 0.05


def within_goal(sb: float | None, bare: float | None) -> bool | None:
    """Whether solbench's median ``sb`` (ms) agrees with the bare span ``bare`` (ms)."""
    if not sb or not bare:
        return None
    if bare < SHORT_MS:
        return abs(sb - bare) * 1e3 <= ABS_US
    return BAND[0] <= sb / bare <= BAND[1]


# ------------------------------------------------------------------------- bare child
class _Cupti:
    """Per-call spans from cupti-python's activity API (records bracketed by CUPTI clock
    readings taken with the device idle before and after each call)."""

    def __init__(self, api_records: bool):
        from cupti import cupti

        self.c = cupti
        self.recs: list[tuple[int, int, int]] = []  # (start, end, is_kernel)
        dev = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET]
        self.kinds = dev + ([cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER] if api_records else [])
        self._kernel = int(cupti.ActivityKind.CONCURRENT_KERNEL)
        self._dev = {int(k) for k in dev}

        def requested():
            return 8 * 1024 * 1024, 0

        def completed(acts):
            for a in acts:
                k = int(a.kind)
                if k in self._dev:
                    self.recs.append((a.start, a.end, k == self._kernel))

        cupti.activity_register_callbacks(requested, completed)
        self.method = "cupti-python activity" + (" (+RUNTIME,DRIVER)" if api_records else "")

    def run(self, call, flush, sync, n: int) -> tuple[list[float], list[float]]:
        c = self.c
        self.recs.clear()
        brackets = []
        for k in self.kinds:
            c.activity_enable(k)
        try:
            for i in range(n):
                flush(i)
                sync()
                t0 = c.get_timestamp()
                call(i)
                sync()
                brackets.append((t0, c.get_timestamp()))
            c.activity_flush_all(1)
        finally:
            for k in self.kinds:
                c.activity_disable(k)
        spans, ksums = [], []
        recs = sorted(self.recs)
        for t0, t1 in brackets:
            win = [r for r in recs if t0 <= r[0] <= t1]
            spans.append((max(r[1] for r in win) - min(r[0] for r in win)) / 1e6 if win else 0.0)
            ksums.append(sum(r[1] - r[0] for r in win if r[2]) / 1e6)
        return spans, ksums


class _TorchProfiler:
    """Fallback: torch.profiler, CUDA activity only; the flush runs on a stream of its own and
    the activities between two flushes (on any other stream) are one call."""

    method = "torch.profiler CUDA-only (cupti-python missing)"

    def run(self, call, flush, sync, n: int) -> tuple[list[float], list[float]]:
        import torch
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        fs = torch.cuda.Stream()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            with torch.cuda.stream(fs):
                flush(-1)  # the first record on the flush stream names its id
            sync()
            for i in range(n):
                with torch.cuda.stream(fs):
                    flush(i)
                sync()
                call(i)
                sync()
            with torch.cuda.stream(fs):
                flush(n)
            sync()
        acts = sorted((e.start_ns(), e.end_ns(), e.device_resource_id(), e.name())
                      for e in prof.profiler.kineto_results.events()
                      if e.device_type() == DeviceType.CUDA and not e.is_user_annotation())
        sid = acts[0][2]
        fl = [a for a in acts if a[2] == sid][1:]
        other = [a for a in acts if a[2] != sid]
        spans, ksums = [], []
        for i in range(n):
            lo, hi = fl[i][1], fl[i + 1][0]
            win = [a for a in other if lo <= a[0] < hi]
            spans.append((max(a[1] for a in win) - min(a[0] for a in win)) / 1e6 if win else 0.0)
            ksums.append(sum(a[1] - a[0] for a in win if not a[3].startswith(("Memcpy", "Memset"))) / 1e6)
        return spans, ksums


class _PerfCounter:
    """CPU stand-in (a check of the script only)."""

    method = "perf_counter (CPU check)"

    def run(self, call, flush, sync, n):
        out = []
        for i in range(n):
            flush(i)
            t0 = time.perf_counter()
            call(i)
            out.append((time.perf_counter() - t0) * 1e3)
        return out, [0.0] * n


def bare_measure(req: dict, timer) -> list[dict]:
    """The bare rows of one request (problem dir, solution JSON or None, workload uuids)."""
    import torch

    from solbench.harness.build import load_entry
    from solbench.inputs import make_inputs
    from solbench.spec import load_problem
    from solbench.spec.dtypes import to_torch
    from solbench.spec.solution import Solution

    dev = req["device"]
    prob = load_problem(req["problem"])
    if req.get("solution"):
        sol = Solution.model_validate_json(req["solution"])
        fn, _ = load_entry(sol, dev, tuple(prob.init_args or ()), 0, 300.0)
        dps = sol.spec.destination_passing_style
    else:
        fn, dps = prob.make_reference(dev), False
    cuda = torch.device(dev).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fbytes = req["flush_bytes"]
    fbuf = torch.empty(max(fbytes // 4, 1), dtype=torch.int32, device=dev)
    rows = []
    by_uuid = {w.uuid: w for w in prob.workloads}
    for uuid in req["workloads"]:
        w = by_uuid[uuid]
        row = {"workload": uuid}
        sets = outs = None
        try:
            k = max(1, min(8, (4 << 30) // max(prob.workload_bytes(w), 1)))
            sets = [make_inputs(prob, w, 1000 + j, dev) for j in range(k)]
            env = prob.definition.resolve_axes(w.axes)
            outs = [[torch.empty(prob.definition.shape_of(s, env) or (), dtype=to_torch(s.dtype), device=dev)
                     for s in prob.definition.outputs.values()] for _ in range(k)] if dps else None

            def call(i, sets=sets, outs=outs):
                args = list(sets[i % len(sets)].values())
                with torch.no_grad():
                    return fn(*args, *outs[i % len(outs)]) if outs is not None else fn(*args)

            def flush(i):
                fbuf.fill_(i & 0x7FFFFFFF)

            for i in range(5):  # warm-up, as the harness's
                flush(i)
                call(i)
            sync()
            spans, ksums = timer.run(call, flush, sync, req["iters"])
            row.update(bare_ms=statistics.median(spans), bare_ksum_ms=statistics.median(ksums),
                       bare_method=timer.method, n=len(spans))
        except Exception as e:  # noqa: BLE001 - a row with its error, the run goes on
            row["bare_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        sets = outs = None
        if cuda:
            torch.cuda.empty_cache()
    return rows


def bare_server(device: str, api_records: bool) -> None:
    """The plain child: one JSON request per stdin line, one JSON reply per stdout line."""
    import torch

    if torch.device(device).type == "cuda":
        try:
            timer = _Cupti(api_records)
        except Exception as e:  # noqa: BLE001 - no cupti-python: the profiler's CUDA-only path
            timer = _TorchProfiler()
            timer.method += f" [{type(e).__name__}: {str(e)[:80]}]"
    else:
        timer = _PerfCounter()
    print(json.dumps({"ready": timer.method}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            rows = bare_measure(req, timer)
        except Exception as e:  # noqa: BLE001
            rows = [{"workload": u, "bare_error": f"{type(e).__name__}: {e}"[:300]} for u in req["workloads"]]
        print(json.dumps({"rows": rows}), flush=True)


class Bare:
    """The parent's handle on the bare child (restarted after a timeout)."""

    def __init__(self, device: str, api_records: bool):
        self.args = [sys.executable, __file__, "--bare-server", "--device", device] + (
            ["--api-records"] if api_records else [])
        self.p = None
        self.method = None

    def _start(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.p = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.method = json.loads(self._line(120))["ready"]

    def _line(self, timeout_s: float) -> str:
        r, _, _ = select.select([self.p.stdout], [], [], timeout_s)
        if not r:
            raise TimeoutError(f"no reply in {timeout_s:.0f} s")
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("bare child exited")
        return line

    def measure(self, req: dict, timeout_s: float) -> list[dict]:
        if self.p is None or self.p.poll() is not None:
            self._start()
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        try:
            return json.loads(self._line(timeout_s))["rows"]
        except (TimeoutError, RuntimeError) as e:
            self.close()
            return [{"workload": u, "bare_error": str(e)} for u in req["workloads"]]

    def close(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None


# ------------------------------------------------------------------------- parent
def items(data: Path | None, only: list[str], candidates: bool, refs: bool) -> list[tuple[str, Path, Path | None]]:
    """(label, problem dir, solution JSON or None for the reference), references first."""
    out = []
    if refs and data is not None:
        for sub in ("L1", "L2", "Quant", "FlashInfer-Bench"):
            for d in sorted((data / sub).glob("*")):
                if (d / "definition.json").exists():
                    out.append((f"{sub}/{d.name[:3]} ref", d, None))
    if candidates:
        sols = ROOT / "src" / "solbench" / "suites" / "solutions"
        for suite in ("l1", "dlrm"):
            for d in sorted((sols / suite).glob("*")):
                for sj in sorted(d.glob("*.json")):
                    out.append((f"{suite}/{d.name} {sj.stem}", ROOT / "src" / "solbench" / "suites" / "data" / suite
                                / d.name, sj))
        if data is not None:
            for d in sorted((ROOT / "examples" / "solutions").glob("*")):
                p = next((data / s / d.name for s in ("L1", "L2", "Quant", "FlashInfer-Bench")
                          if (data / s / d.name).exists()), None)
                for sj in sorted(d.glob("*.json")):
                    if p is not None:
                        out.append((f"examples/{d.name} {sj.stem}", p, sj))
    if only:
        out = [x for x in out if any(o in x[0] or o in str(x[1]) for o in only)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="sol-execbench-dev root")
    ap.add_argument("--out", type=Path, required=False)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workloads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30, help="bare calls per workload")
    ap.add_argument("--budget-s", type=float, default=270.0, help="start no new problem after this")
    ap.add_argument("--step-timeout-s", type=float, default=90.0)
    ap.add_argument("--only", action="append", default=[], help="substring of a label or path")
    ap.add_argument("--no-candidates", action="store_true")
    ap.add_argument("--no-references", action="store_true")
    ap.add_argument("--api-records", action="store_true")
    ap.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.bare_server:
        bare_server(a.device, a.api_records)
        return 0
    import torch

    from solbench.harness import EvalConfig
    from solbench.harness.evaluator import Evaluator, flush_bytes
    from solbench.spec import load_problem
    from solbench.spec.problem import reference_solution
    from solbench.spec.solution import Solution

    a.out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    bare = Bare(a.device, a.api_records)
    fb = flush_bytes(EvalConfig(device=a.device))
    todo = items(a.data, a.only, not a.no_candidates, not a.no_references)
    rows: list[dict] = []
    res = {"device": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
           "goal": f"ratio in {BAND} or within {ABS_US} us under {SHORT_MS * 1e3:.0f} us", "rows": rows,
           "complete": False}
    print(f"{len(todo)} items; flush {fb / 2**20:.0f} MiB", flush=True)
    print(f"{'item':44s} {'workload':10s} {'solbench':>9s} {'bare':>9s} {'ratio':>7s} ok  "
          f"{'gap sb':>8s} {'gap bare':>8s}", flush=True)
    for label, pdir, sj in todo:
        if time.monotonic() - t_start > a.budget_s:
            print(f"budget {a.budget_s:.0f} s spent: stopping before {label}", flush=True)
            break
        try:
            prob = load_problem(pdir)
            sol = Solution.model_validate_json(sj.read_text()) if sj else reference_solution(prob)
            ws = [w.uuid for w in prob.workloads[:a.workloads]]
        except Exception as e:  # noqa: BLE001
            rows.append({"item": label, "error": f"{type(e).__name__}: {e}"[:300]})
            print(f"{label:44s} load error: {rows[-1]['error'][:80]}", flush=True)
            continue
        t0 = time.monotonic()
        brows = {r["workload"]: r for r in bare.measure(
            {"problem": str(pdir), "solution": sj.read_text() if sj else None, "workloads": ws,
             "iters": a.iters, "device": a.device, "flush_bytes": fb}, a.step_timeout_s)}
        t_bare = time.monotonic() - t0
        sb: dict[str, dict] = {}
        ev = None
        try:
            ev = Evaluator(prob, EvalConfig(device=a.device, workloads=ws, rounds=1, reference_timing=False,
                                            call_timeout_s=a.step_timeout_s))
            for t in ev.evaluate(sol):
                e = t.evaluation
                ts = e.timing
                sb[t.workload.uuid] = {"status": e.status.value,
                                       "solbench_ms": ts.median_ms if ts else None,
                                       "solbench_ksum_ms": ts.kernel_sum_median_ms if ts else None,
                                       "method": ts.method if ts else None,
                                       "clocks": (e.telemetry or {}).get("clocks")}
        except Exception as e:  # noqa: BLE001
            for u in ws:
                sb[u] = {"status": f"error: {type(e).__name__}: {e}"[:300]}
        finally:
            if ev is not None:
                ev.close()
        for u in ws:
            r = {"item": label, "problem": str(pdir), "workload": u, **brows.get(u, {}), **sb.get(u, {}),
                 "bare_s": round(t_bare, 1), "solbench_s": round(time.monotonic() - t0 - t_bare, 1)}
            s, b = r.get("solbench_ms"), r.get("bare_ms")
            r["ratio"] = s / b if s and b else None
            r["ok"] = within_goal(s, b)
            for side, m, k in (("sb", s, r.get("solbench_ksum_ms")), ("bare", b, r.get("bare_ksum_ms"))):
                r[f"gap_{side}_ms"] = m - k if m is not None and k is not None else None
            rows.append(r)

            def f(x, spec=".4f"):
                return format(x, spec) if isinstance(x, (int, float)) else "-"

            print(f"{label[:44]:44s} {u[:10]:10s} {f(s):>9s} {f(b):>9s} {f(r['ratio'], '.3f'):>7s} "
                  f"{'y' if r['ok'] else ('n' if r['ok'] is False else '-'):2s}  {f(r['gap_sb_ms']):>8s} "
                  f"{f(r['gap_bare_ms']):>8s}  {r.get('bare_error') or ('' if r.get('status') == 'PASSED' else r.get('status', ''))}"[:200],
                  flush=True)
        res["bare_method"] = bare.method
        (a.out / "timing_agreement.json").write_text(json.dumps(res, indent=1))
    bare.close()
    res["complete"] = True
    judged = [r for r in rows if r.get("ok") is not None]
    res["summary"] = {"rows": len(rows), "judged": len(judged), "within_goal": sum(r["ok"] for r in judged),
                      "ratio_median": statistics.median([r["ratio"] for r in judged]) if judged else None,
                      "bare_method": bare.method, "wall_s": round(time.monotonic() - t_start, 1)}
    (a.out / "timing_agreement.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res["summary"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
