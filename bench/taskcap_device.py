"""Task-bound probe (harness/taskcap.py) for a device host: what the cgroup hierarchy looks
like, which mechanism bounds a sandbox's processes and threads in each sandbox mode, whether
a thread bomb and a fork bomb end as the ``task_limit`` RUNTIME_ERROR within seconds with
nothing left behind, and the peak task count of honest candidates (thread pools joined in the
call, torch.compile) under the default limit.

    PYTHONPATH=$PWD/src python bench/taskcap_device.py --device cuda --out $OUT/taskcap_cuda.json
    PYTHONPATH=$PWD/src python bench/taskcap_device.py --device cpu --out bench/results/taskcap_cpu.json

Prints a table; writes JSON to --out after every stage. Stages run most important first and
stop at ``--budget-s`` (default 55 s); a stage that would start past it is recorded as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

T_START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "harness"))
HERE = ROOT / "tests" / "harness"
BOMB_NAMES = {"sbx-taskbomb", "sbx-forkbomb"}


def layout() -> dict:
    """What this process sees of the cgroup hierarchies (and the probe's verdict)."""
    from solbench.harness import taskcap

    def read(p):
        try:
            return Path(p).read_text()
        except OSError as e:
            return f"<{type(e).__name__}: {e}>"

    mi = [ln for ln in read("/proc/self/mountinfo").splitlines() if " cgroup" in ln]
    out = {"proc_self_cgroup": read("/proc/self/cgroup").splitlines(), "cgroup_mounts": mi,
           "uid": os.geteuid(), "cpus": os.cpu_count(), "probe": taskcap.probe(refresh=True),
           "default_limit": taskcap.default_limit()}
    mounts = taskcap.parse_mountinfo("\n".join(mi))
    mine = taskcap.parse_proc_cgroup(read("/proc/self/cgroup"))
    if "v2" in mounts and "v2" in mine:
        d = os.path.join(mounts["v2"], mine["v2"].lstrip("/"))
        out["v2_dir"] = d
        for f in ("cgroup.controllers", "cgroup.subtree_control", "cgroup.type"):
            out[f"v2 {f}"] = read(os.path.join(d, f)).strip()
        out["v2_writable"] = os.access(d, os.W_OK)
    return out


def _problem(root: Path):
    from harness_helpers import matmul_problem

    return matmul_problem(root, (256,), tol=1e-2, uuid="w")


def bomb_tasks() -> int:
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    n += Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() in BOMB_NAMES
                except OSError:
                    pass
        except OSError:
            pass
    return n


def case(device: str, cand: str, env: dict[str, str]) -> dict:
    """Evaluate one candidate of tests/harness under ``env``; the peak tasks of every worker
    sandbox it used (the cgroup's pids.peak, read just before the cgroup is removed)."""
    import tempfile

    from solbench.harness import EvalConfig, evaluate, taskcap
    from solbench.spec import load_solution

    peaks: list[int] = []
    marks: dict[str, float] = {}
    orig, orig_check = taskcap.TaskCap.release, taskcap.TaskCap.check

    def release(self, *a, **kw):
        pk = self.peak()
        first = not self._released
        if pk is not None and first:
            peaks.append(pk)
        t = time.perf_counter()
        out = orig(self, *a, **kw)
        if first and self.hit is not None:  # how long emptying and removing its cgroup took
            marks["release_s"] = round(time.perf_counter() - t, 3)
        return out

    def check(self):
        hit = orig_check(self)
        if hit and "hit_at_s" not in marks:  # seconds from evaluate() to the limit being seen
            marks["hit_at_s"] = round(time.perf_counter() - t0, 2)
        return hit

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    taskcap.TaskCap.release, taskcap.TaskCap.check = release, check
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as d:
            p = _problem(Path(d))
            t0 = time.perf_counter()
            (t,) = evaluate(p, load_solution(HERE / cand, p),
                            EvalConfig(device=device, iters=4, rounds=1, first_call_timeout_s=120))
            took = time.perf_counter() - t0
        ev = t.evaluation
        time.sleep(0.5)
        tl = [f.evidence for f in ev.findings if f.check == "task_limit"]
        return {"candidate": cand, "env": env, "status": ev.status.value, "seconds": round(took, 1),
                "task_limit": tl[0] if tl else None, "bound_by": (ev.environment.sandbox or {}).get("tasks"),
                "mode": (ev.environment.sandbox or {}).get("mode"), "peaks": peaks,
                "left_behind": bomb_tasks(), **marks,
                "log_tail": " | ".join((ev.log or "").strip().splitlines()[-3:])[-400:]}
    finally:
        taskcap.TaskCap.release, taskcap.TaskCap.check = orig, orig_check
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget-s", type=float, default=55.0)
    ap.add_argument("--bomb-limit", type=int, default=512)
    a = ap.parse_args()
    from solbench.harness import sandbox

    res: dict = {"device": a.device, "layout": layout(), "cases": [], "skipped": []}
    for mode in ("uid", "userns"):
        os.environ["SOLBENCH_SANDBOX"] = mode
        m, warn = sandbox.resolve_mode(a.device)
        res[f"status_{mode}"] = {"mode": m, "warning": warn, "tasks": sandbox.sandbox_status(a.device)["tasks"]}
    os.environ["SOLBENCH_SANDBOX"] = "auto"

    def save():
        res["elapsed_s"] = round(time.perf_counter() - T_START, 1)
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(res, indent=1, default=str))

    lo = res["layout"]
    print(f"uid={lo['uid']} cpus={lo['cpus']} probe={lo['probe']} default_limit={lo['default_limit']}")
    for k in ("v2_dir", "v2 cgroup.controllers", "v2 cgroup.subtree_control", "v2 cgroup.type", "v2_writable"):
        if k in lo:
            print(f"  {k}: {lo[k]}")
    for ln in lo["cgroup_mounts"][:12]:
        print(f"  mount: {ln}")
    for mode in ("uid", "userns"):
        print(f"  SOLBENCH_SANDBOX={mode}: {res[f'status_{mode}']}")
    save()
    auto = sandbox.resolve_mode(a.device)[0]
    lim = {"SOLBENCH_SANDBOX_NPROC": str(a.bomb_limit)}
    # most important first: the bound binds in the mode the device gets, honest pools stay
    # far below it, the fallback binds too; the fork bomb (forks of a process holding a CUDA
    # context may be slow) and torch.compile last
    plan = [("cand_taskbomb_threads.py", lim), ("cand_futures_per_call.py", {}),
            ("cand_threadpool_per_call.py", {}),
            ("cand_taskbomb_threads.py", {**lim, "SOLBENCH_SANDBOX_PIDS_CGROUP": "0"}),
            ("cand_taskbomb_fork.py", lim), ("cand_sandbox_compile.py", {})]
    print(f"sandbox mode (auto) on {a.device}: {auto}")
    print(f"{'candidate':28s} {'env':52s} {'status':14s} {'s':>6s} peaks  task_limit / left")
    for cand, env in plan:
        need = max([10.0] + [c.get("seconds", 0) for c in res["cases"]])
        envs = " ".join(f"{k}={v}" for k, v in env.items())
        if time.perf_counter() - T_START + need > a.budget_s:
            res["skipped"].append(f"{cand} {envs}")
            continue
        try:
            c = case(a.device, cand, env)
        except Exception as e:  # noqa: BLE001 - a probe reports, it does not stop
            c = {"candidate": cand, "env": env, "status": "ERROR", "error": f"{type(e).__name__}: {e}"}
        res["cases"].append(c)
        print(f"{cand:28s} {envs:52s} {c['status']:14s} {c.get('seconds', '?'):>6} {c.get('peaks')} "
              f"{c.get('task_limit')} left={c.get('left_behind')}"
              + (f" hit_at={c['hit_at_s']}s release={c.get('release_s')}s" if "hit_at_s" in c else "") + (f" {c.get('error', '')}" if 'error' in c else ""),
              flush=True)
        if c["status"] != "PASSED" and c.get("task_limit") is None:
            print(f"    log: {c.get('log_tail', '')}")
        save()
    save()
    print(f"done in {res['elapsed_s']} s" + (f"; skipped: {res['skipped']}" if res["skipped"] else ""))


if __name__ == "__main__":
    main()
