"""Pack the hand-written Triton candidates (``triton_src/*.py``) into solution JSON files at
``solutions/<suite>/<problem>/triton.json``.

Run ``python -m solbench.suites.pack_triton`` after editing a kernel; a test checks that the
packed JSON still carries the current source text. ``bench/triton_check.py`` checks every
candidate against its problem's reference on the GPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).parent
SRC_DIR = HERE / "triton_src"
SOLUTIONS_DIR = HERE / "solutions"

#: (suite, problem, source file, destination-passing style)
CANDIDATES: list[tuple[str, str, str, bool]] = [
    ("dlrm", "dlrm01_embedding_bag_sum_fp32", "embedding_bag_sum.py", True),
    ("dlrm", "dlrm01_embedding_bag_sum_bf16", "embedding_bag_sum.py", True),
    ("dlrm", "dlrm01_embedding_bag_sum_weighted_fp32", "embedding_bag_sum.py", True),
    ("dlrm", "dlrm02_tbe_forward_fp32", "tbe_forward.py", False),
    ("dlrm", "dlrm02_tbe_forward_bf16", "tbe_forward.py", False),
    ("dlrm", "dlrm05_sparse_sgd_update", "sparse_sgd.py", False),
    ("dlrm", "dlrm05_rowwise_adagrad_update", "rowwise_adagrad.py", False),
    ("dlrm", "dlrm06_dot_interaction_forward_fp32", "dot_interaction.py", False),
    ("dlrm", "dlrm06_dot_interaction_forward_bf16", "dot_interaction.py", False),
    ("dlrm", "dlrm10_jagged_to_padded_fp32", "jagged_to_padded.py", False),
    ("dlrm", "dlrm11_jagged_segment_sum_fp32", "jagged_segment_sum.py", False),
    ("dlrm", "dlrm11_jagged_softmax_fp32", "jagged_softmax.py", False),
    ("l1", "relu_fp32", "relu.py", True),
    ("l1", "relu_bf16", "relu.py", True),
    ("l1", "softmax_fp32", "softmax.py", True),
    ("l1", "softmax_bf16", "softmax.py", True),
    ("l1", "layer_norm_fp32", "layer_norm.py", False),
    ("l1", "rms_norm_fp32", "rms_norm.py", False),
    ("l1", "rms_norm_bf16", "rms_norm.py", False),
    ("l1", "sum_dim1_fp32", "sum_dim1.py", False),
    ("l1", "cumsum_fp32", "cumsum.py", False),
]


def solution_dict(suite: str, problem: str, src_file: str, dps: bool) -> dict:
    text = (SRC_DIR / src_file).read_text()
    summary = text.split('"""')[1].strip().splitlines()[0] if '"""' in text else src_file
    return {
        "name": f"{problem}__triton",
        "definition": problem,
        "author": "solbench",
        "description": summary,
        "spec": {
            "languages": ["triton"],
            "target_hardware": ["H200", "B200"],
            "entry_point": f"{src_file}::run",
            "destination_passing_style": dps,
            "dependencies": ["torch", "triton"],
        },
        "sources": [{"path": src_file, "content": text}],
    }


def solution_path(suite: str, problem: str) -> Path:
    return SOLUTIONS_DIR / suite / problem / "triton.json"


def pack() -> list[Path]:
    """Write every candidate's JSON; returns the paths."""
    out = []
    for suite, problem, src, dps in CANDIDATES:
        p = solution_path(suite, problem)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(solution_dict(suite, problem, src, dps), indent=2) + "\n")
        out.append(p)
    return out


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for p in pack():
        print(p)


if __name__ == "__main__":
    main()
