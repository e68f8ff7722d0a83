"""Issue 30 on the GPU: the hostile and honest candidates of tests/harness built for items
1, 4, 7, 8, 9, 10, and a flag lowered only inside each call, evaluated on CUDA, one line per
trace as it comes (status, speedup, the findings that decide). Run from the repository root:

    timeout 900 python bench/issue30_cuda.py [--out bench/results/issue30_cuda.jsonl]

Expected: identity cache (all variants) and blinded clock patch REWARD_HACK; absurd output
address never a crash (on CUDA the output crosses as an IPC handle, not described by
``data_ptr``, so the patch changes nothing: PASSED); scoped TF32 INCORRECT_NUMERICAL where
TF32's error fails the tolerance, else REWARD_HACK ``precision_downgrade`` from its kernels'
names; wrong constant INCORRECT_NUMERICAL; flush-to-zero softmax PASSED or INCORRECT with
``denormals_flushed`` advisory (CUDA kernels flush by default); default device, transposed
view, exact softmax PASSED with no hack finding and no ``guards_unverified`` (the parent
must be able to read the sandboxed worker's memory)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
sys.path.insert(0, str(ROOT / "src"))

from harness_helpers import matmul_problem, py_solution  # noqa: E402

from solbench.harness import EvalConfig, evaluate  # noqa: E402
from solbench.spec import load_problem, load_solution  # noqa: E402


def _sol(p, name, **rep):
    s = load_solution(ROOT / "tests" / "harness" / name, p)
    src = s.sources[0].content
    for a, b in rep.items():
        src = src.replace(a, b)
    return s.model_copy(update={"sources": [s.sources[0].model_copy(update={"content": src})]})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--tmp", default="/tmp/issue30_cuda")
    ap.add_argument("--only", default=None, help="run the cases whose label holds this text")
    a = ap.parse_args()
    tmp = Path(a.tmp)
    mm = matmul_problem(tmp, (1024, 2048, 4096))
    sys.path.insert(0, str(ROOT / "tests" / "harness"))
    from test_flush_denormal import _softmax_problem
    from test_honest_views_modes import _transpose_problem
    from cand_transposed_view import TRANSPOSE

    sm = _softmax_problem(tmp / "sm03", 0.03)
    tr = _transpose_problem(tmp / "tr", 8192)
    loose = matmul_problem(tmp / "loose", (2048,), tol=5e-2)  # a tolerance TF32 passes
    kb = load_problem(ROOT / "tests" / "adversarial" / "problems" / "kb_linear.py")
    cases = [
        # items not yet run on CUDA first; the identity caches (item 8, run before) last
        ("absurd output address high", mm, _sol(mm, "cand_absurd_output_addr.py")),
        ("absurd output address kernel", mm, _sol(mm, "cand_absurd_output_addr.py", **{'MODE = "high"': 'MODE = "kernel"'})),
        ("blinded clock patch", mm, _sol(mm, "cand_blind_clock_patch.py")),
        ("scoped TF32 (flags restored each call)", mm, _sol(mm, "cand_scoped_tf32.py")),
        ("scoped TF32, tolerance 5e-2", loose, _sol(loose, "cand_scoped_tf32.py")),
        ("default device (honest)", mm, _sol(mm, "cand_default_device.py", **{'"cpu"': '"cuda"'})),
        ("transposed result (honest)", mm, _sol(mm, "cand_transposed_view.py")),
        ("x.t() (honest)", tr, py_solution("tview", TRANSPOSE, "tr")),
        ("flush-to-zero softmax T=0.03", sm, _sol(sm, "cand_flush_denormal.py", **{"TEMPERATURE = 1.0": "TEMPERATURE = 0.03"})),
        ("wrong constant (KernelBench)", kb, load_solution(ROOT / "tests" / "harness" / "cand_kb_wrong_constant.py", kb)),
        ("identity cache same", mm, _sol(mm, "cand_identity_cache.py")),
        ("identity cache clone", mm, _sol(mm, "cand_identity_cache.py", **{'MODE = "same"': 'MODE = "clone"'})),
        ("identity cache past rounds", mm, _sol(mm, "cand_identity_cache.py", **{"AFTER = 0": "AFTER = 12"})),
    ]
    out = open(a.out, "a") if a.out else None
    for label, p, s in cases:
        if a.only and a.only not in label:
            continue
        t0 = time.time()
        try:
            traces = evaluate(p, s, EvalConfig(device="cuda", rounds=3))
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{label}: ERROR {type(e).__name__}: {e}", flush=True)
            continue
        for t in traces:
            ev = t.evaluation
            fs = [(f.check, f.severity) for f in ev.findings if f.severity != "advisory" or f.check in (
                "denormals_flushed", "guards_unverified", "timing_plausibility")]
            sp = ev.performance.speedup_factor if ev.performance else None
            print(f"{label}: {t.workload.uuid} {ev.status.value} speedup={sp} {fs} ({time.time() - t0:.0f} s)", flush=True)
            if out:
                out.write(json.dumps({"case": label, "workload": t.workload.uuid, "status": ev.status.value,
                                      "speedup": sp, "findings": fs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
