"""Sandbox probe (harness/sandbox.py) for a device: the sandboxed worker sees the device, the
buffers cross the boundary (CUDA IPC on GPU, memfds over SCM_RIGHTS on CPU) both ways, the
denials hold, and worker start-up costs so much with and without the sandbox.

    PYTHONPATH=$PWD/src python bench/sandbox_device.py --device cuda --out bench/results/sandbox_device.json
    PYTHONPATH=$PWD/src python bench/sandbox_device.py --device cpu  --out bench/results/sandbox_cpu.json

Prints a table; writes JSON to --out (after every stage). On CUDA it also tries the net
namespace (SOLBENCH_SANDBOX_NET=1, the default since this showed CUDA IPC works with it).

Issue 30 stages: ``view`` prints what the worker is shown (the bwrap binds, device nodes,
memory cap) and runs :data:`TOOLCHAIN` inside the device's sandbox, step by step, each
under its own timeout (torch and the device, nvidia-smi, a Triton kernel: gcc, Python
headers and libcuda for its launcher, torch.compile/inductor, nvcc and ninja, the absence of
the host's home and work dir); the hostile cases ``cand_sandbox_walk`` (a results file and a
problem planted in a work dir outside /tmp), ``cand_env_dump`` (a token exported),
``cand_mem_grow`` (a 2 GiB cap) and an honest compile under the RLIMIT_DATA fallback
(``SOLBENCH_SANDBOX_MEM_CGROUP=0``: does CUDA start under a DATA limit?). A bind a host
lacks: ``SOLBENCH_SANDBOX_BIND`` / ``SOLBENCH_SANDBOX_DEV_BIND`` (docs/isolation.md).
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
                    "leaks": [ln[:600] for ln in (ev.log or "").splitlines()
                              if "LEAK" in ln or "tok-probe-7f3a" in ln or "NO CAP" in ln][:3],
                    "memory": [f.message for f in ev.findings if f.check == "memory_limit"][:1],
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


#: steps run inside the sandbox by the ``view`` stage: (name, Python source); each prints one
#: line starting with OK or FAIL (a step that raises prints its exception)
TOOLCHAIN = [
    ("torch", "import torch; print('OK', torch.__version__)"),
    ("device", "import torch, sys; d = sys.argv[1]\n"
               "x = torch.ones(1024, device=d); y = (x * 2).sum().item(); "
               "print('OK' if y == 2048 else 'FAIL', d, torch.cuda.get_device_name(0) if d.startswith('cuda') else '')"),
    ("nvidia-smi", "import subprocess, shutil, sys\n"
                   "if not sys.argv[1].startswith('cuda'): print('OK skipped on cpu'); raise SystemExit\n"
                   "r = subprocess.run(['nvidia-smi', '-L'], capture_output=True, text=True, timeout=60)\n"
                   "print('OK' if r.returncode == 0 else 'FAIL', (r.stdout + r.stderr).strip()[:300])"),
    # Triton reads a kernel's source from its file (inspect), so the step writes its kernel
    # into the sandbox's private /tmp and runs it from there, as a candidate's file would be
    ("triton", "import sys, runpy, pathlib\n"
               "if not sys.argv[1].startswith('cuda'): print('OK skipped on cpu'); raise SystemExit\n"
               "src = ('import torch, triton, triton.language as tl\\n'\n"
               "       '@triton.jit\\n'\n"
               "       'def k(x, y, n, B: tl.constexpr):\\n'\n"
               "       '    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n\\n'\n"
               "       '    tl.store(y + i, tl.load(x + i, mask=m) * 3, mask=m)\\n'\n"
               "       'x = torch.arange(4096, device=\"cuda\", dtype=torch.float32); y = torch.empty_like(x)\\n'\n"
               "       'k[(4,)](x, y, 4096, B=1024); torch.cuda.synchronize()\\n'\n"
               "       'print(\"OK\" if torch.equal(y, x * 3) else \"FAIL\", \"triton\", triton.__version__)\\n')\n"
               "f = pathlib.Path('/tmp/triton_step.py'); f.write_text(src); runpy.run_path(str(f), run_name='__main__')"),
    ("torch.compile", "import sys, torch\n"
                      "f = torch.compile(lambda a: torch.relu(a) * 2 + 1)\n"
                      "a = torch.randn(4096, device=sys.argv[1])\n"
                      "print('OK' if torch.allclose(f(a), torch.relu(a) * 2 + 1) else 'FAIL', 'inductor')"),
    ("nvcc+ninja", "import shutil, subprocess\n"
                   "out = []\n"
                   "for t in ('nvcc', 'ninja', 'cc', 'c++'):\n"
                   "    w = shutil.which(t)\n"
                   "    v = subprocess.run([w, '--version'], capture_output=True, text=True, timeout=60).stdout.strip().splitlines()[-1:] if w else ['absent']\n"
                   "    out.append(f'{t}: {v}')\n"
                   "print('OK', '; '.join(out))"),
    ("hidden", "import os, sys\n"
               "# a folder above a bound one exists, empty but for the way down: a file in it is a leak\n"
               "seen = {p: sorted(os.listdir(p)) for p in sys.argv[2:] if os.path.isdir(p)}\n"
               "leak = {p: [e for e in v if not os.path.isdir(os.path.join(p, e))] for p, v in seen.items()}\n"
               "leak = {p: v for p, v in leak.items() if v}\n"
               "print(('FAIL files shown: ' + repr(leak)) if leak else 'OK only folders on the way to bound code: ' + repr(seen), "
               "'| / holds', sorted(os.listdir('/')))"),
]


def view(device: str, step_timeout_s: float = 240.0) -> dict:
    """What a worker of ``device`` is shown, and whether the toolchain runs inside it."""
    import subprocess

    from solbench.harness import memcap, sandbox

    mode = sandbox.resolve_mode(device)[0]
    out: dict = {"mode": mode, "memory": memcap.status(), "device_nodes": sandbox.device_paths(device),
                 "code_paths": sandbox.code_paths(), "steps": {}}
    if mode == "none":
        out["error"] = "no sandbox on this host"
        return out
    args = sandbox._bwrap_args(mode, device, sandbox.bwrap_path())
    out["binds"] = [" ".join(args[i:i + 3]) for i, x in enumerate(args)
                    if x in ("--ro-bind", "--bind", "--dev-bind", "--symlink")]
    import solbench

    env = sandbox.sandbox_env(sandbox.worker_env(os.environ), mode, None)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__)))
    hidden = [os.path.expanduser("~"), os.getcwd(), str(ROOT)]
    for name, src in TOOLCHAIN:
        cmd = sandbox.wrap([sys.executable, "-c", src, device] + hidden, device, mode, None)
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=step_timeout_s, env=env,
                               stdin=subprocess.DEVNULL)
            text = (r.stdout.strip().splitlines() or [""])[-1] if r.returncode == 0 else \
                f"FAIL exit {r.returncode}: " + " | ".join((r.stdout + r.stderr).strip().splitlines()[-6:])
        except subprocess.TimeoutExpired:
            text = f"FAIL timed out after {step_timeout_s:.0f} s"
        out["steps"][name] = {"result": text[:1500], "seconds": round(time.perf_counter() - t0, 1)}
        print(f"  in the sandbox: {name:14s} {text[:400]} ({out['steps'][name]['seconds']} s)", flush=True)
    return out


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
    if room("view", 60.0):
        print(f"what the worker sees ({a.device}):", flush=True)
        res["view"] = view(a.device)
        v = res["view"]
        print(f"  memory cap: {v['memory']}\n  device nodes: {v['device_nodes']}\n"
              f"  binds: {v.get('binds')}", flush=True)
        save()
    print(f"{'candidate':30s} {'env':44s} {'status':14s} leaks / hack checks", flush=True)
    # issue 30: a candidate that walks the host (a work dir with a results file and a problem
    # planted outside /tmp), one that prints its environment with a token exported, one that
    # allocates until it dies under a 2 GiB cap, and an honest compile under RLIMIT_DATA alone
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="solbench-probe-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    (work / "results.jsonl").write_text('{"evaluation": {"status": "PASSED"}}\n')
    (work / "definition.json").write_text("{}")
    planted = json.dumps({"results file": str(work / "results.jsonl"),
                          "problem definition": str(work / "definition.json")})
    case("cand_sandbox_walk.py", {"SOLBENCH_SANDBOX": "auto", "SOLBENCH_TEST_PLANTED": planted})
    case("cand_env_dump.py", {"SOLBENCH_SANDBOX": "auto", "MY_API_TOKEN": "tok-probe-7f3a"})
    case("cand_mem_grow.py", {"SOLBENCH_SANDBOX": "auto", "SOLBENCH_SANDBOX_MEM": "2G",
                              "SOLBENCH_TEST_MEM_CEILING": str(6 << 30)})
    case("cand_sandbox_compile.py", {"SOLBENCH_SANDBOX": "auto", "SOLBENCH_SANDBOX_MEM_CGROUP": "0"})
    import shutil

    shutil.rmtree(work, ignore_errors=True)
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
