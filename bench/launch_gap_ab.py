"""Why does the harness read a launch-bound eager call slower than a plain process does
(issue 31: the eager reference of L1/011, a dozen small kernels, read 1.4-1.7x slower in
solbench than in SOL-ExecBench's CUPTI timer)? An A/B of each thing the worker does
differently, on the same calls, printing launch-gap figures.

What runs in the worker between two kernel launches of a timed call (harness/worker.py
``_timed_iter``): only the candidate's own Python and PyTorch's dispatcher, under (1) the
timed torch.profiler session (CPU + CUDA activity with the default "ranges" markers, CUDA
only with "streams"), (2) the seccomp filter (sandbox.seccomp_filter: on x86 kernels whose
speculation mitigations default to "seccomp" it also forces SSBD / STIBP on the process),
(3) the sandbox's namespaces and limits (no per-launch cost expected), and (4) between
calls, the worker sleeps in ``recv`` while the parent fills the next input set, verifies
and reads /proc: its core idles into a deep C-state and a low clock and its caches are
evicted, so each call starts cold, where a plain loop's are hot. The guards run after the
call (``_interposition``, the copy-out), never between its launches.

Rows, per call: the device span (ms, first kernel start to last kernel end), the kernel sum,
and the gap per launch ((span - kernel sum) / (kernels - 1), us):

- ``plain <variant>`` (a plain child process, no harness, CUPTI through cupti-python or a
  CUDA-only torch.profiler session as bench/timing_agreement.py): ``tight`` (flush, sync,
  call, sync in a loop), ``idle10`` (10 ms of host sleep between calls, the harness's duty
  cycle), ``idle10+thrash`` (and 64 MiB of host memory written between calls), ``idle10+spin``
  (then a 500 us spin right before the call), ``cpu-activity`` (torch.profiler with CPU and
  CUDA activity, tight), ``seccomp`` / ``seccomp-ssb-allow`` (solbench's filter loaded
  without / with SECCOMP_FILTER_FLAG_SPEC_ALLOW; the process's Speculation lines printed);
- ``harness <variant>`` (``solbench`` evaluation of the same call as a problem, reference as
  the candidate, no reference timing; the trace's median and kernel-sum median): ``default``,
  ``streams`` (CUDA-only session), ``no-sandbox`` (SOLBENCH_SANDBOX=off), ``no-seccomp``,
  ``seccomp-old`` (SOLBENCH_SANDBOX_SECCOMP_SSB=0: the filter as before this change),
  ``preroll500`` (SOLBENCH_WORKER_PREROLL_US=500: the worker spins 500 us before each call).

GPU (lead; each row is a child process of its own: about 2.5 min on one H100 for the rotary
case alone, twice that for both):
    python bench/launch_gap_ab.py --case rotary --out $OUT/gap
CPU (per-op overhead of the worker's path, 200 chained adds of 16 elements; committed figures
in bench/results/launch_gap_cpu.json):
    PYTHONPATH=src python bench/launch_gap_ab.py --device cpu --out bench/results
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

RMSNORM = ("import torch\n\ndef run(x, w):\n    xf = x.to(torch.float32)\n"
           "    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-5)\n"
           "    return ((xf * inv) * w.to(torch.float32)).to(x.dtype)\n")
# a rotary embedding written the eager way (about a dozen small kernels, as L1/011's reference)
ROTARY = ("import torch\n\ndef _rot(x):\n    x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)\n\n"
          "def run(q, k, cos, sin):\n    c = cos.unsqueeze(1).to(torch.float32)\n    s = sin.unsqueeze(1).to(torch.float32)\n"
          "    qf, kf = q.to(torch.float32), k.to(torch.float32)\n"
          "    qo = qf * c + _rot(qf) * s\n    ko = kf * c + _rot(kf) * s\n"
          "    return qo.to(q.dtype), ko.to(k.dtype)\n")
CHAIN = "import torch\n\ndef run(x):\n    for _ in range(200):\n        x = x + 1.0\n    return x\n"

CASES_CUDA = {
    "rmsnorm_bf16_7x4096": {
        "axes": {"m": {"type": "const", "value": 7}, "n": {"type": "const", "value": 4096}},
        "inputs": {"x": {"shape": ["m", "n"], "dtype": "bfloat16"}, "w": {"shape": ["n"], "dtype": "bfloat16"}},
        "outputs": {"y": {"shape": ["m", "n"], "dtype": "bfloat16"}}, "reference": RMSNORM},
    "rotary_bf16_1x32x128x128": {
        "axes": {"b": {"type": "const", "value": 1}, "h": {"type": "const", "value": 32},
                 "t": {"type": "const", "value": 128}, "d": {"type": "const", "value": 128}},
        "inputs": {"q": {"shape": ["b", "h", "t", "d"], "dtype": "bfloat16"},
                   "k": {"shape": ["b", "h", "t", "d"], "dtype": "bfloat16"},
                   "cos": {"shape": ["b", "t", "d"], "dtype": "bfloat16"},
                   "sin": {"shape": ["b", "t", "d"], "dtype": "bfloat16"}},
        "outputs": {"qo": {"shape": ["b", "h", "t", "d"], "dtype": "bfloat16"},
                    "ko": {"shape": ["b", "h", "t", "d"], "dtype": "bfloat16"}}, "reference": ROTARY},
}
CASES_CPU = {
    "chain200_add_fp32_16": {
        "axes": {"n": {"type": "const", "value": 16}}, "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": CHAIN},
}
PLAIN = ["tight", "idle10", "idle10+thrash", "idle10+spin", "cpu-activity", "seccomp", "seccomp-ssb-allow"]
HARNESS = {"default": {}, "streams": {"markers": "streams"}, "no-sandbox": {"env": {"SOLBENCH_SANDBOX": "off"}},
           "no-seccomp": {"env": {"SOLBENCH_SANDBOX_SECCOMP": "0"}},
           "seccomp-old": {"env": {"SOLBENCH_SANDBOX_SECCOMP_SSB": "0"}},
           "preroll500": {"env": {"SOLBENCH_WORKER_PREROLL_US": "500"}}}


def write_case(root: Path, name: str, d: dict) -> Path:
    p = root / name
    p.mkdir(parents=True, exist_ok=True)
    (p / "definition.json").write_text(json.dumps({"name": name, **d}))
    (p / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": {
        k: {"type": "random"} for k in d["inputs"]}}) + "\n")
    return p


# ---------------------------------------------------------------- plain child
def plain(problem: str, variant: str, device: str, iters: int) -> dict:
    """One plain variant of one problem (runs in its own child process)."""
    import torch

    from solbench.inputs import make_inputs
    from solbench.spec import load_problem

    out: dict = {}
    if variant.startswith("seccomp"):
        import ctypes

        import pyseccomp as sc

        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # no_new_privs, as the sandbox sets it
        os.environ["SOLBENCH_SANDBOX_SECCOMP_SSB"] = "1" if variant.endswith("allow") else "0"
        from solbench.harness.sandbox import seccomp_filter

        out["seccomp_loaded"] = seccomp_filter()
        out["speculation"] = [ln.strip() for ln in open("/proc/self/status") if ln.startswith("Specul")]
        del sc
    prob = load_problem(problem)
    w = prob.workloads[0]
    fn = prob.make_reference(device)
    sets = [list(make_inputs(prob, w, 7 + j, device).values()) for j in range(4)]
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fbytes = 2 * (torch.cuda.get_device_properties(0).L2_cache_size if cuda else (16 << 20))
    fbuf = torch.empty(fbytes // 4, dtype=torch.int32, device=device)
    thrash = bytearray(64 << 20) if "thrash" in variant else None

    def flush(i):
        if "idle10" in variant:
            time.sleep(0.010)
            if thrash is not None:
                thrash[::64] = bytes(len(thrash[::64]))  # one write per cache line
            if "spin" in variant:
                t = time.perf_counter()
                while time.perf_counter() - t < 500e-6:
                    pass
        fbuf.fill_(i & 0x7FFFFFFF)

    host: list[float] = []

    def call(i):
        t0 = time.perf_counter()
        with torch.no_grad():
            r = fn(*sets[i % 4])
        host.append((time.perf_counter() - t0) * 1e3)  # the call's host side (launches), ms
        return r

    for i in range(5):
        flush(i)
        call(i)
    sync()
    if not cuda:
        xs = []
        for i in range(iters):
            flush(i)
            t0 = time.perf_counter()
            call(i)
            xs.append((time.perf_counter() - t0) * 1e3)
        out.update(span_ms=statistics.median(xs), ksum_ms=None, method="perf_counter",
                   host_ms=statistics.median(host[-iters:]))
        return out
    if variant == "cpu-activity":
        from torch.profiler import ProfilerActivity, profile

        from timing_agreement import _TorchProfiler

        class _Both(_TorchProfiler):
            """The fallback's segmentation, with CPU activity recorded too (the harness's
            "ranges" setting)."""

            method = "torch.profiler CPU+CUDA"

            def run(self, call, flush, sync, n):
                mod = sys.modules["torch.profiler"]
                mod.profile = lambda activities: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                try:
                    return super().run(call, flush, sync, n)
                finally:
                    mod.profile = profile

        timer = _Both()
    else:
        from timing_agreement import _Cupti, _TorchProfiler

        try:
            timer = _Cupti(False)
        except Exception:  # noqa: BLE001
            timer = _TorchProfiler()
    spans, ksums = timer.run(call, flush, sync, iters)
    out.update(span_ms=statistics.median(spans), ksum_ms=statistics.median(ksums), method=timer.method,
               host_ms=statistics.median(host[-iters:]))
    return out


def kernels_per_call(problem: str, device: str) -> int | None:
    """Kernels one call launches (torch.profiler, CUDA activity, one call)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from solbench.inputs import make_inputs
    from solbench.spec import load_problem

    prob = load_problem(problem)
    fn = prob.make_reference(device)
    args = list(make_inputs(prob, prob.workloads[0], 1, device).values())
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn(*args)
        torch.cuda.synchronize()
    return sum(1 for e in p.profiler.kineto_results.events()
               if e.device_type() == DeviceType.CUDA and not e.is_user_annotation()
               and not e.name().startswith(("Memcpy", "Memset")))


def harness_row(problem: str, device: str, markers: str | None) -> dict:
    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_problem
    from solbench.spec.problem import reference_solution

    prob = load_problem(problem)
    kw = {"cupti_markers": markers} if markers else {}
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device=device, rounds=1, reference_timing=False, **kw))
    ts = t.evaluation.timing
    return {"status": t.evaluation.status.value, "span_ms": ts.median_ms if ts else None,
            "ksum_ms": ts.kernel_sum_median_ms if ts else None, "method": ts.method if ts else None,
            # the worker's own clock around the call: its host side (launches), ms
            "host_ms": ts.host_median_ms if ts else None,
            "sandbox": (t.evaluation.environment.sandbox or {}).get("mode")}


def _child(args: list[str], env: dict | None, timeout_s: float) -> dict:
    e = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(env or {})
    try:
        r = subprocess.run([sys.executable, __file__, *args], env=e, capture_output=True, text=True,
                           timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout_s:.0f} s"}
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return json.loads(line[-1]) if line else {"error": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--step-timeout-s", type=float, default=120.0)
    ap.add_argument("--only", default=None, help="plain or harness")
    ap.add_argument("--case", default=None, help="substring of the case names to run (default: all)")
    ap.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, problem, variant = a.child
        if kind == "plain":
            res = plain(problem, variant, a.device, a.iters)
        elif kind == "kernels":
            res = {"kernels": kernels_per_call(problem, a.device)}
        else:
            res = harness_row(problem, a.device, HARNESS[variant].get("markers"))
        print(json.dumps(res), flush=True)
        return 0
    cuda = a.device.startswith("cuda")
    cases = CASES_CUDA if cuda else CASES_CPU
    tmp = Path(tempfile.mkdtemp(prefix="gap_ab_"))
    rows = []
    res = {"device": a.device, "rows": rows, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "loadavg": os.getloadavg(), "cpus": os.cpu_count()}
    try:
        import torch

        if cuda:
            res["gpu"] = torch.cuda.get_device_name()
        res["spec_store_bypass"] = Path("/sys/devices/system/cpu/vulnerabilities/spec_store_bypass").read_text().strip()
        res["kernel"] = os.uname().release
    except Exception:  # noqa: BLE001
        pass
    print(f"{res.get('gpu', 'cpu')}  kernel {res.get('kernel')}  ssb: {res.get('spec_store_bypass')}", flush=True)
    print(f"{'case':28s} {'row':26s} {'span ms':>9s} {'ksum ms':>9s} {'gap/launch us':>14s} "
          f"{'host/launch us':>14s}  note", flush=True)
    for name, d in cases.items():
        if a.case and a.case not in name:
            continue
        p = str(write_case(tmp, name, d))
        nk = _child(["--device", a.device, "--child", "kernels", p, "-"], None, a.step_timeout_s).get("kernels") \
            if cuda else 200
        todo = ([("plain", v, {}) for v in PLAIN] if a.only in (None, "plain") else []) + \
               ([("harness", v, HARNESS[v].get("env", {})) for v in HARNESS] if a.only in (None, "harness") else [])
        if not cuda:
            todo = [t for t in todo if t[1] in ("tight", "idle10", "seccomp", "seccomp-ssb-allow", "default",
                                                "no-sandbox", "no-seccomp", "seccomp-old")]
        for kind, v, env in todo:
            r = _child(["--device", a.device, "--iters", str(a.iters), "--child", kind, p, v], env, a.step_timeout_s)
            r.update(case=name, row=f"{kind} {v}", kernels=nk)
            s, k = r.get("span_ms"), r.get("ksum_ms")
            if s is not None and nk and nk > 1:
                # CUDA: the span's host gaps per launch; CPU: the call's time per op on the
                # in-process clock (the worker's own clock for harness rows: on a loaded host
                # the parent's held window is noise of the stop/resume path, see the notes)
                hm = r.get("host_ms")
                r["gap_per_launch_us"] = ((s - (k or 0.0)) / (nk - 1)) * 1e3 if cuda else \
                    (hm if hm is not None else s) / nk * 1e3
            if r.get("host_ms") is not None and nk:
                r["host_per_launch_us"] = r["host_ms"] / nk * 1e3
            rows.append(r)
            note = r.get("error") or "; ".join(str(x) for x in (r.get("method"), r.get("speculation"), r.get("sandbox"))
                                              if x)
            g = r.get("gap_per_launch_us")
            print(f"{name:28s} {r['row']:26s} {s if s is not None else float('nan'):9.4f} "
                  f"{k if k is not None else float('nan'):9.4f} {g if g is not None else float('nan'):14.2f} "
                  f"{r.get('host_per_launch_us', float('nan')):14.2f}  "
                  f"{note[:90]}", flush=True)
            if a.out:
                a.out.mkdir(parents=True, exist_ok=True)
                (a.out / f"launch_gap_{'cuda' if cuda else 'cpu'}.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
