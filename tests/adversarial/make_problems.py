"""Writes the tiny problems of the adversarial corpus (tests/adversarial/problems/).

Run once after editing: ``python tests/adversarial/make_problems.py``. The generated
definition.json / workload.jsonl files are committed; this script documents them.
Each problem has one CPU-sized workload (tag "cpu") so a corpus run stays short.
"""

import json
import uuid
from pathlib import Path

HERE = Path(__file__).parent / "problems"

PROBLEMS = {
    "add_f32": dict(
        description="out = x + y, float32, elementwise.",
        axes={"n": {"type": "var"}},
        inputs={"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
        outputs={"out": {"shape": ["n"], "dtype": "float32"}},
        reference="import torch\n\n\ndef run(x, y):\n    return x + y\n",
        workload={"axes": {"n": 4096}},
    ),
    "gelu_f32": dict(
        description="tanh-approximated GELU, float32 (tolerance 1e-2 as many SOL-ExecBench problems).",
        axes={"m": {"type": "var"}, "k": {"type": "const", "value": 256}},
        inputs={"x": {"shape": ["m", "k"], "dtype": "float32"}},
        outputs={"out": {"shape": ["m", "k"], "dtype": "float32"}},
        reference=(
            "import math\nimport torch\n\n\n@torch.no_grad()\ndef run(x):\n"
            "    c = math.sqrt(2.0 / math.pi)\n"
            "    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))\n"
        ),
        workload={"axes": {"m": 64}},
    ),
    "matmul_f32": dict(
        description="c = a @ b, float32 (a bf16 / TF32 product passes the 1e-2 tolerance).",
        axes={"m": {"type": "var"}, "k": {"type": "const", "value": 512}, "n": {"type": "const", "value": 64}},
        inputs={"a": {"shape": ["m", "k"], "dtype": "float32"}, "b": {"shape": ["k", "n"], "dtype": "float32"}},
        outputs={"c": {"shape": ["m", "n"], "dtype": "float32"}},
        reference="import torch\n\n\n@torch.no_grad()\ndef run(a, b):\n    return a @ b\n",
        workload={"axes": {"m": 64}},
    ),
    "softmax_long_f32": dict(
        description=(
            "row softmax over 32768 columns: every output is ~3e-5, so an all-zeros output "
            "passes the upstream atol of 1e-2 (a known degenerate problem, threats.md)."
        ),
        axes={"rows": {"type": "var"}, "cols": {"type": "const", "value": 32768}},
        inputs={"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
        outputs={"out": {"shape": ["rows", "cols"], "dtype": "float32"}},
        reference="import torch\n\n\n@torch.no_grad()\ndef run(x):\n    return torch.softmax(x, dim=-1)\n",
        workload={"axes": {"rows": 4}},
    ),
    "clamp_f32": dict(
        description=(
            "clamp(x, -100, 100) of randn inputs: the identity passes (a degenerate problem, "
            "used to test the screen)."
        ),
        axes={"n": {"type": "var"}},
        inputs={"x": {"shape": ["n"], "dtype": "float32"}},
        outputs={"out": {"shape": ["n"], "dtype": "float32"}},
        reference="import torch\n\n\ndef run(x):\n    return torch.clamp(x, -100.0, 100.0)\n",
        workload={"axes": {"n": 4096}},
    ),
    "rmsnorm_bf16": dict(
        description="RMSNorm in bfloat16 with float32 accumulation (mixed precision).",
        axes={"m": {"type": "var"}, "h": {"type": "const", "value": 512}},
        inputs={"x": {"shape": ["m", "h"], "dtype": "bfloat16"}, "weight": {"shape": ["h"], "dtype": "bfloat16"}},
        outputs={"out": {"shape": ["m", "h"], "dtype": "bfloat16"}},
        reference=(
            "import torch\n\n\n@torch.no_grad()\ndef run(x, weight):\n"
            "    xf = x.float()\n"
            "    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
            "    return (y * weight.float()).to(torch.bfloat16)\n"
        ),
        workload={"axes": {"m": 32}},
    ),
    "add_large_f32": dict(
        description=(
            "out = x + y over 2^25 float32 elements (GPU only): 384 MiB of traffic, a SOL time "
            "of tens of microseconds, so a candidate that skips its work times below SOL."
        ),
        axes={"n": {"type": "var"}},
        inputs={"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
        outputs={"out": {"shape": ["n"], "dtype": "float32"}},
        reference="import torch\n\n\ndef run(x, y):\n    return x + y\n",
        workload={"axes": {"n": 2**25}},
        tags=["gpu"],
    ),
}


def main() -> None:
    for name, p in PROBLEMS.items():
        d = HERE / name
        d.mkdir(parents=True, exist_ok=True)
        defn = {
            "name": name, "op_type": "test", "description": p["description"], "axes": p["axes"],
            "inputs": p["inputs"], "outputs": p["outputs"], "reference": p["reference"],
        }
        (d / "definition.json").write_text(json.dumps(defn, indent=2) + "\n")
        w = {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"solbench/adversarial/{name}")),
            "axes": p["workload"]["axes"],
            "inputs": {k: {"type": "random"} for k in p["inputs"]},
            "tolerance": {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99},
            "tags": p.get("tags", ["cpu"]),
        }
        (d / "workload.jsonl").write_text(json.dumps(w) + "\n")


if __name__ == "__main__":
    main()
