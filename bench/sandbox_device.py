"""Sandbox probe (harness/sandbox.py) for a device: the sandboxed worker sees the device, the
buffers cross the boundary (CUDA IPC on GPU, memfds over SCM_RIGHTS on CPU) both ways, the
denials hold, and worker start-up costs so much with and without the sandbox.

    PYTHONPATH=$PWD/src python bench/sandbox_device.py --device cuda --out bench/results/sandbox_device.json
    PYTHONPATH=$PWD/src python bench/sandbox_device.py --device cpu  --out bench/results/sandbox_cpu.json

Prints a table; writes JSON to --out (after every stage). On CUDA it also tries the net
namespace (SOLBENCH_SANDBOX_NET=1, the default since this showed CUDA IPC works with it).
Stages run most important first and stop at ``--budget-s`` (default 80 s): a stage that
would start past it is recorded as skipped. Every case records why it ended as it did
(``reason``: the hack findings, the failed correctness check, or the log's last lines).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

T_START = time.perf_counter()  # the budget counts the imports too

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

HERE = ROOT / "tests" / "harness"


def _mm_problem(root: Path):
    sys.path.insert(0, str(HERE))
    from harness_helpers import matmul_problem

    return matmul_problem(root, (256,), tol=1e-2, uuid="w")


def startup(device: str, mode_env: str, n: int) -> list[float]:
    """Seconds from WorkerHandle() to its hello, ``n`` times, under SOLBENCH_SANDBOX=mode_env."""
    from solbench.harness.process import WorkerHandle

    os.environ["SOLBENCH_SANDBOX"] = mode_env
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        h = WorkerHandle(device)
        out.append(time.perf_counter() - t0)
        h.close()
    return out


def launch_overhead_ms(device: str, n: int = 20) -> dict:
    """Milliseconds to run /bin/true plainly and inside this device's sandbox (the sandbox's
    own cost, without Python's and torch's start-up, which dominate a worker's)."""
    import shutil
    import subprocess

    from solbench.harness import sandbox

    true = shutil.which("true") or "/bin/true"
    mode = sandbox.resolve_mode(device)[0]
    out = {}
    for name, cmd in (("plain", [true]), ("sandboxed", sandbox.wrap([true], device, mode, None))):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            xs.append((time.perf_counter() - t0) * 1e3)
        out[name] = {"median_ms": round(statistics.median(xs), 1), "min_ms": round(min(xs), 1)}
    return out


def evaluate_case(device: str, cand: str, env: dict[str, str]) -> dict:
    """Evaluate one candidate of tests/harness through the real harness under ``env``."""
    import tempfile

    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_solution

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with tempfile.TemporaryDirectory() as d:
            p = _mm_problem(Path(d))
            s = load_solution(HERE / cand, p)
            t0 = time.perf_counter()
            (t,) = evaluate(p, s, EvalConfig(device=device, iters=4, rounds=2))
            ev = t.evaluation
            return {"candidate": cand, "env": env, "status": ev.status.value,
                    "leaks": [ln for ln in (ev.log or "").splitlines() if "LEAK" in ln][:3],
                    "checks": sorted({f.check for f in ev.findings if f.severity == "hack"}),
                    "reason": _reason(ev),
                    "seconds": round(time.perf_counter() - t0, 2)}
    finally:
        import solbench  # the escape candidate's probe file, written where no sandbox stopped it

        Path(solbench.__file__).parent.joinpath("__pycache__", "solbench_sandbox_probe.cpython-311.pyc") \
            .unlink(missing_ok=True)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _reason(ev) -> str:
    """Why a case ended as it did, in one string: PASSED says nothing more; otherwise the
    hack findings, the failed correctness check, and the log's last lines (where a candidate's
    exception and the worker's own errors land)."""
    if ev.status.value == "PASSED":
        return ""
    parts = [f"{f.check}: {f.message}"[:300] for f in ev.findings if f.severity == "hack"][:3]
    extra = (ev.correctness.extra or {}) if ev.correctness is not None else {}
    if extra.get("failed_check"):
        parts.append(f"correctness: {extra['failed_check']}")
    tail = " | ".join((ev.log or "").strip().splitlines()[-8:])
    if tail:
        parts.append(f"log: {tail[-1200:]}")
    return "; ".join(parts)


def ipc_roundtrip(device: str) -> dict:
    """A sandboxed worker maps the parent's buffers and writes into them: the parent reads
    the worker's result back (the DPS path), so mapping works both ways."""
    import tempfile

    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_solution

    with tempfile.TemporaryDirectory() as d:
        p = _mm_problem(Path(d))
        src = Path(d) / "dps.py"
        src.write_text("import torch\n\ndef run(a, b, c):\n    torch.matmul(a, b, out=c)\n")
        s = load_solution(src, p)
        s = s.model_copy(update={"spec": s.spec.model_copy(update={"destination_passing_style": True})})
        (t,) = evaluate(p, s, EvalConfig(device=device, iters=4, rounds=2))
        return {"status": t.evaluation.status.value, "log_tail": (t.evaluation.log or "")[-400:],
                "reason": _reason(t.evaluation)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--n", type=int, default=1, help="worker starts per mode")
    ap.add_argument("--budget-s", type=float, default=80.0,
                    help="no stage starts after this many seconds (what ran is kept)")
    a = ap.parse_args()
    t_start = T_START
    from solbench.harness import sandbox

    res: dict = {"device": a.device, "status": sandbox.sandbox_status(a.device), "skipped": []}

    def save() -> None:  # after every stage: a run cut short by its time cap keeps what it had
        res["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(res, indent=1, default=str))

    def room(stage: str, need_s: float) -> bool:
        """Whether ``stage`` (about ``need_s`` seconds) still fits in the budget."""
        if time.perf_counter() - t_start + need_s <= a.budget_s:
            return True
        res["skipped"].append(stage)
        print(f"skipped (budget {a.budget_s:.0f} s): {stage}", flush=True)
        save()
        return False

    def case(cand: str, env: dict) -> None:
        envs = " ".join(f"{k}={v}" for k, v in env.items())
        # a case costs about what the longest one so far did (8 s at least)
        need = max([8.0] + [c.get("seconds", 0.0) for c in res.get("cases", [])])
        if not room(f"{cand} {envs}", need):
            return
        try:
            c = evaluate_case(a.device, cand, env)
        except Exception as e:  # noqa: BLE001 - a probe reports, it does not stop
            c = {"candidate": cand, "env": env, "error": f"{type(e).__name__}: {e}",
                 "reason": f"{type(e).__name__}: {e}"}
        res.setdefault("cases", []).append(c)
        print(f"{cand:30s} {envs:44s} {c.get('status', 'ERROR'):14s} "
              f"{c.get('leaks') or c.get('checks') or c.get('error', '')} ({c.get('seconds', '?')} s)"
              + (f"\n    reason: {c['reason'][:600]}" if c.get("reason") else ""),
              flush=True)
        save()

    st = res["status"]
    print(f"sandbox on {a.device}: mode={st['mode']} uid={st['uid']} namespaces="
          f"{','.join(st['namespaces'])} seccomp={st.get('seccomp')} warning={st['warning']}", flush=True)
    if a.device.startswith("cuda"):
        import torch

        res["gpu"] = torch.cuda.get_device_name(0)
    save()
    # most important first: the GPU through the sandbox, buffers both ways, the denials, an
    # honest thread pool; the costs last
    os.environ["SOLBENCH_SANDBOX"] = "auto"
    try:
        res["ipc_dps"] = ipc_roundtrip(a.device)
    except Exception as e:  # noqa: BLE001
        res["ipc_dps"] = {"status": "ERROR", "log_tail": f"{type(e).__name__}: {e}",
                          "reason": f"{type(e).__name__}: {e}"}
    print(f"DPS buffers through the sandbox (sandboxed worker writes the parent's output "
          f"buffers): {res['ipc_dps']['status']} {res['ipc_dps'].get('reason', '')[-400:]}", flush=True)
    save()
    print(f"{'candidate':30s} {'env':44s} {'status':14s} leaks / hack checks", flush=True)
    case("cand_sandbox_escape.py", {"SOLBENCH_SANDBOX": "auto"})
    case("cand_threadpool_per_call.py", {"SOLBENCH_SANDBOX": "auto"})
    case("cand_sandbox_compile.py", {"SOLBENCH_SANDBOX": "auto"})
    if a.device.startswith("cuda"):
        case("cand_sandbox_escape.py", {"SOLBENCH_SANDBOX": "auto", "SOLBENCH_SANDBOX_NET": "1"})
    case("cand_sandbox_escape.py", {"SOLBENCH_SANDBOX": "off"})
    os.environ["SOLBENCH_SANDBOX"] = "auto"
    if room("launch overhead", 3.0):
        res["launch_ms"] = launch_overhead_ms(a.device)
        lm = res["launch_ms"]
        print(f"/bin/true launch: plain median {lm['plain']['median_ms']} ms (min {lm['plain']['min_ms']}), "
              f"sandboxed median {lm['sandboxed']['median_ms']} ms (min {lm['sandboxed']['min_ms']})", flush=True)
        save()
    res["startup_s"] = {}
    for m in ("off", "auto"):
        if not room(f"worker start-up SOLBENCH_SANDBOX={m}", 6.0 * a.n):
            continue
        xs = startup(a.device, m, a.n)
        res["startup_s"][m] = xs
        print(f"worker start-up  SOLBENCH_SANDBOX={m:4s}  median {statistics.median(xs):6.2f} s  "
              f"min {min(xs):6.2f} s  max {max(xs):6.2f} s  (n={len(xs)})", flush=True)
        save()
    os.environ["SOLBENCH_SANDBOX"] = "auto"
    save()
    print(f"done in {res['elapsed_s']} s" + (f"; skipped: {res['skipped']}" if res["skipped"] else ""))
    if a.out:
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
