"""Writers for tiny problems and solutions used by the end-to-end harness tests."""

import json
from pathlib import Path

from solbench.spec import Solution


def write_problem(root: Path, definition: dict, workloads: list[dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition))
    (root / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in workloads) + "\n")
    return root


def py_solution(name: str, source: str, definition: str, dps: bool = False,
                entry: str = "run") -> Solution:
    return Solution.model_validate({
        "name": name, "definition": definition, "author": "tests",
        "spec": {"languages": ["pytorch"], "entry_point": f"cand.py::{entry}",
                 "destination_passing_style": dps},
        "sources": [{"path": "cand.py", "content": source}],
    })


RELU = "import torch\n\ndef run(x):\n    return torch.relu(x)\n"


def relu_problem(root: Path, sizes=(4096,), name: str = "relu", uuid: str | None = None):
    """The float32 ``y = relu(x)`` problem ``name`` under ``root/name``, one workload per size
    in ``sizes`` (uuid ``uuid`` for a single size, else ``w<n>``), random inputs. Returns the
    loaded Problem."""
    from solbench.spec import load_problem

    return load_problem(write_problem(root / name, {
        "name": name, "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": RELU,
    }, [{"uuid": uuid if uuid is not None and len(sizes) == 1 else f"w{n}", "axes": {"n": n},
         "inputs": {"x": {"type": "random"}}} for n in sizes]))


def matmul_problem(root: Path, sizes=(256,), tol: float = 1e-3, uuid: str | None = None):
    """The n x n float32 matmul problem ``c = a @ b`` under ``root/mm``, one workload per size
    in ``sizes`` (uuid ``uuid`` for a single size, else ``w<n>``), atol = rtol = ``tol``.
    Returns the loaded Problem."""
    from solbench.spec import load_problem

    return load_problem(write_problem(root / "mm", {
        "name": "mm", "axes": {"n": {"type": "var"}},
        "inputs": {"a": {"shape": ["n", "n"], "dtype": "float32"},
                   "b": {"shape": ["n", "n"], "dtype": "float32"}},
        "outputs": {"c": {"shape": ["n", "n"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(a, b):\n    return a @ b\n",
    }, [{"uuid": uuid if uuid is not None and len(sizes) == 1 else f"w{n}", "axes": {"n": n},
         "inputs": {"a": {"type": "random"}, "b": {"type": "random"}},
         "tolerance": {"max_atol": tol, "max_rtol": tol}} for n in sizes]))


_EVAL_ELSEWHERE = """
import json, sys
from solbench.harness import EvalConfig, evaluate
from solbench.spec import Solution, load_problem
args = json.loads(sys.argv[1])
sol = Solution.model_validate_json(open(args["solution"]).read())
for t in evaluate(load_problem(args["problem"]), sol, EvalConfig(**args["cfg"])):
    print("TRACE " + t.to_json_line(), flush=True)
"""


def evaluate_elsewhere(problem, solution: Solution, tmp: Path, **cfg) -> list:
    """``evaluate(problem, solution, EvalConfig(**cfg))`` in a fresh Python process; the
    traces. For tests that start processes of their own (busy loops) while a candidate is
    evaluated: in this process the harness takes any child it did not start, after its first
    worker, for a candidate's leftover (``child_process``); there they are siblings. The new
    process inherits this one's CPU affinity and environment."""
    import os
    import subprocess
    import sys

    from solbench.spec.trace import Trace

    tmp.mkdir(parents=True, exist_ok=True)
    sp = tmp / "solution.json"
    sp.write_text(solution.model_dump_json())
    arg = json.dumps({"problem": str(problem.path), "solution": str(sp), "cfg": cfg})
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", _EVAL_ELSEWHERE, arg], capture_output=True, text=True,
                       env=env, timeout=900)
    traces = [Trace.from_json_line(x[6:]) for x in r.stdout.splitlines() if x.startswith("TRACE ")]
    assert r.returncode == 0 and traces, (r.returncode, r.stderr[-3000:])
    return traces


def bf16_matmul_here() -> bool:
    """Whether this CPU runs an fp32 matmul on bf16 inputs under precision "medium"
    (oneDNN on AMX / AVX512-BF16): the scoped flag changes nothing elsewhere."""
    import torch

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        low = a @ b
    finally:
        torch.set_float32_matmul_precision(old)
    return not torch.equal(low, a @ b)
