"""Helpers for the spec tests: the dev dataset's location and writers for small problem and
solution files in tmp_path."""

import json
from pathlib import Path

import pytest

#: the SOL-ExecBench dev dataset beside the checkout (../shared); tests skip when it is absent
DEV = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "sol-execbench-dev"
DEV_DIRS = sorted(p.parent for p in DEV.rglob("definition.json")) if DEV.is_dir() else []

ADD_DEF = {
    "name": "vec_add",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y):\n    return x + y\n",
}


def workload(uuid: str, n: int = 8, **extra) -> dict:
    return {"uuid": uuid, "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}, **extra}


def write_problem(root: Path, definition: dict | None = None, workloads: list | None = None,
                  raw_workloads: str | None = None) -> Path:
    """Write definition.json + workload.jsonl under ``root`` and return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition if definition is not None else ADD_DEF))
    if raw_workloads is None:
        raw_workloads = "\n".join(json.dumps(w) for w in (workloads or [workload("w0")])) + "\n"
    (root / "workload.jsonl").write_text(raw_workloads)
    return root


def solution_dict(**spec_over) -> dict:
    spec = {"languages": ["pytorch"], "entry_point": "main.py::run",
            "destination_passing_style": False}
    spec.update(spec_over)
    return {"name": "cand", "definition": "vec_add", "author": "t", "spec": spec,
            "sources": [{"path": "main.py", "content": "def run(x, y):\n    return x + y\n"}]}


@pytest.fixture
def dev_dirs():
    if not DEV_DIRS:
        pytest.skip(f"dev dataset not found at {DEV}")
    return DEV_DIRS
