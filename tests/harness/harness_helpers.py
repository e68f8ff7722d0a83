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
