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
