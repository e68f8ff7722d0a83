"""Walk a real torchview trace of a SOL-ExecBench reference with solar mode's layer rules (CPU).

An independent check of solar mode's recorder (:mod:`solbench.sol.solar_graph`) on the nvfp4
problems: torchview (the tracer upstream SOLAR uses) records the reference's graph, after the
two source rewrites upstream applies to quantised kernels before tracing (NVlabs/SOLAR
``solbenchv2/QUANT_CONVERSION.md``, described in docs/sol-model.md): case 4, the fp4/fp8 dtype
literals become ``torch.int8``; case 7 (``--case7``), the blockwise GEMM method
``<obj>.scaled_mm(...)`` becomes one ``matmul`` of the operands cast to float32, its scales
unused. The walk: a function node reads its input tensors' elements when none of them was
produced by another function node, and writes each output tensor that nothing reads. Every node
is visited (from the inputs and back from every node reached), so a buffer a creator made
(``torch.zeros_like``) is walked too. Indexing reads its whole input here (solar mode reads
what it selects), so this is a cross-check, not a reproduction.

Prints the elements a token (the slope between two workloads), to compare with the official
rows' (sol_ms x 7.67 TB/s / 0.5 B, docs/sol-model.md).

    pip install torchview graphviz          # or: pip install -e '.[torchview]'
    python bench/solar_torchview_walk.py Quant/033_nvfp4_moe_routing_with_topk_selection \
        '{"num_tokens": 128}' '{"num_tokens": 256}' --tokens 128 --case7

Measured (torchview 0.2.7, CPU, dev set): elements a token 033 41,620 (official 42,520),
025 69,792 (64,342), 009 78,400 (77,082), 029 319,488 (348,278) with --case7.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"

#: case 7's replacement for the blockwise GEMM: one matmul of the operands cast to float32,
#: scales and block structure ignored (what upstream traces instead of the tile loop)
ONE_MATMUL = '''
def _one_matmul_scaled_mm(mat_a, mat_b, scale_a=None, scale_b=None, scale_recipe_a=None,
                          scale_recipe_b=None, bias=None, output_dtype=None,
                          global_decode_a=None, global_decode_b=None, **kwargs):
    a = mat_a.to(torch.float32) if mat_a.dtype == torch.int8 else mat_a
    b = mat_b.to(torch.float32) if mat_b.dtype == torch.int8 else mat_b
    out = torch.matmul(a, b.transpose(-2, -1) if a.shape[-1] == b.shape[-1] else b)
    if bias is not None:
        out = out + bias
    return out.to(output_dtype) if output_dtype is not None else out
'''


def rewritten_source(src: str, case7: bool) -> str:
    for lit in ("torch.float4_e2m1fn_x2", "torch.float8_e4m3fn", "torch.float8_e5m2"):
        src = src.replace(lit, "torch.int8")
    if case7:
        src = re.sub(r"(?<!def )\b\w+\.scaled_mm\(", "_one_matmul_scaled_mm(", src)
        src = src.replace("def get_inputs", ONE_MATMUL + "\ndef get_inputs", 1)
    return src


def walk(problem: Path, axes: dict, case7: bool) -> int:
    from torchview import draw_graph
    from torchview.computation_node import FunctionNode, TensorNode

    d = json.loads((problem / "definition.json").read_text())
    ns: dict = {}
    exec(compile(rewritten_source(d["reference"], case7), str(problem / "reference.py"), "exec"), ns)
    full = {k: v["value"] for k, v in d["axes"].items() if v.get("type") == "const"}
    full.update(axes)
    for k, v in d["axes"].items():
        if v.get("type") == "expr":
            full[k] = eval(v["expression"], {}, dict(full))  # the definition's own axis expressions
    torch.manual_seed(0)
    inputs = ns["get_inputs"](full, torch.device("cpu"))
    names = list(inputs)

    class Reference(nn.Module):
        def forward(self, *args):
            return ns["run"](**dict(zip(names, args)))

    g = draw_graph(Reference(), input_data=list(inputs.values()), depth=99, device="cpu",
                   expand_nested=True, roll=False, save_graph=False)
    seen: set[int] = set()
    functions = []
    stack = list(g.root_container)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, FunctionNode):
            functions.append(n)
        stack.extend(n.children)
        stack.extend(n.parents)
    numel = lambda t: int(torch.Size(t.tensor_shape).numel())  # noqa: E731
    total = 0
    for f in functions:
        ins = [p for p in f.parents if isinstance(p, TensorNode)]
        if not any(isinstance(pp, FunctionNode) for p in ins for pp in p.parents):
            total += sum(numel(p) for p in ins)
        total += sum(numel(c) for c in f.children if isinstance(c, TensorNode) and not c.children)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("problem", help="problem directory, or <subset>/<name> under --data")
    ap.add_argument("axes1", help="JSON axes of the first workload")
    ap.add_argument("axes2", help="JSON axes of the second (more tokens)")
    ap.add_argument("--tokens", type=int, required=True, help="tokens the second has more than the first")
    ap.add_argument("--case7", action="store_true", help="also rewrite the blockwise GEMM into one matmul")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    try:
        import torchview  # noqa: F401
    except ImportError:
        sys.exit("solar_torchview_walk: needs torchview and graphviz (pip install -e '.[torchview]')")
    p = Path(args.problem)
    p = p if p.is_dir() else args.data / args.problem
    t1 = walk(p, json.loads(args.axes1), args.case7)
    t2 = walk(p, json.loads(args.axes2), args.case7)
    slope = (t2 - t1) / args.tokens
    print(f"{p.name}: {slope:,.1f} elements a token; {t1:,} elements at the first workload")

if __name__ == "__main__":
    main()
