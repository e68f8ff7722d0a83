"""Is the sandbox's seccomp filter loaded in a worker on this host? One CPU evaluation of a
candidate that reports, at import, from inside the sandbox: the ``Seccomp:`` line of
/proc/self/status (2 = a filter is loaded), ``SOLBENCH_SANDBOX_SECCOMP_LOADED`` (what the
worker's own load returned), whether pyseccomp imports there, and what ``shmget`` (on the deny
list) returns. Prints the candidate's lines and the verdict.

    PYTHONPATH=$PWD/src python bench/seccomp_probe.py [cpu] [cuda]
"""
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "harness"))

CAND = r'''
import ctypes, os, sys
st = [ln.strip() for ln in open("/proc/self/status") if ln.startswith(("Seccomp", "NoNewPrivs"))]
try:
    import pyseccomp
    ps = "imports: " + getattr(pyseccomp, "__file__", "?")
except Exception as e:
    ps = f"{type(e).__name__}: {e}"
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.shmget(0, 4096, 0o1000 | 0o600)
err = ctypes.get_errno()
if rc >= 0:
    libc.shmctl(rc, 0, None)
print("PROBE", st, "LOADED=", os.environ.get("SOLBENCH_SANDBOX_SECCOMP_LOADED"), "pyseccomp", ps,
      "shmget rc", rc, "errno", err, file=sys.stderr, flush=True)
import torch
def run(a, b):
    return a @ b
'''


def main() -> int:
    from harness_helpers import matmul_problem, py_solution
    from solbench.harness import EvalConfig, evaluate, sandbox

    for dev in sys.argv[1:] or ["cpu"]:
        print(f"parent: sandbox_status({dev}) =", sandbox.sandbox_status(dev), flush=True)
        with tempfile.TemporaryDirectory() as d:
            p = matmul_problem(Path(d), (32,), tol=1e-3)
            (t,) = evaluate(p, py_solution("probe", CAND, p.definition.name),
                            EvalConfig(device=dev, rounds=1, timing=False))
            print(dev, "status:", t.evaluation.status.value)
            log = t.evaluation.log or ""
            print("\n".join(ln for ln in log.splitlines() if "PROBE" in ln) or log[-2000:], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
