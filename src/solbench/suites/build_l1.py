"""Generate the ``l1`` suite: single-op problems covering KernelBench level 1's ground.

Run ``python -m solbench.suites.build_l1`` to rewrite ``suites/data/l1/`` from the problem
list below (deterministic: the same code gives the same bytes, workload uuids are uuid5 of
the problem name and axes). ``--check`` then runs the design-time screen of
:mod:`solbench.suites.check` on the CPU-tagged workloads (``--check-all``: every workload,
slow on a laptop) and exits non-zero if any trivial candidate passes or an honest fp64
candidate fails.

Design rules every problem follows (see docs/threats.md, "Trivial-candidate
screen"):

* Inputs come from a ``make_inputs(axes, device)`` function in the reference (the format's
  ``custom_inputs_entrypoint``), so each distribution is explicit and reviewable: weights
  are scaled by 1/sqrt(fan_in) so GEMM/conv outputs have unit scale, norm inputs get
  per-row/channel scales (log-uniform over [0.1, 10]) and offsets so that a passthrough
  cannot pass, activations get inputs wide enough to reach every region of the function,
  products and scans get inputs that neither vanish nor explode, losses get per-sample
  difficulty that spreads the per-sample loss over orders of magnitude.
* Losses and reductions keep a per-sample / per-row output (``reduction='none'``): a 0-d
  output would be matched exactly by the screen's "mean of the reference output" candidate.
* Tolerances are stated per family: fp32 elementwise 1e-5, fp32 GEMM 1e-4 at unit output
  scale (rejects TF32), fp32 convolutions allow TF32 (PyTorch's cuDNN default, declared
  with ``allow_tf32``) at 2e-3, bf16 1e-2 (one bf16 ulp is 2^-7 = 0.78% relative); an
  ``atol`` tied to the output's typical magnitude where outputs shrink with size
  (softmax ~1/V, L2 norm ~1/sqrt(D), Frobenius ~1/sqrt(numel), L1 ~1/D).
* Every problem has one small workload tagged ``cpu`` (CI) and GPU-sized workloads at
  shapes taken from common models (ResNet-50, LLaMA-7B/8B, BERT, Stable Diffusion UNet,
  MobileNetV2, GPT-2 vocab sizes); each input set stays below ~300 MB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

DATA_DIR = Path(__file__).resolve().parent / "data" / "l1"
UUID_NAMESPACE = uuid.UUID("6f1b8a4e-2d0c-5c3a-9e55-1c0b7e9d4a21")

HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"

F32 = "float32"
BF16 = "bfloat16"
TORCH_DT = {F32: "torch.float32", BF16: "torch.bfloat16"}
SHORT = {F32: "fp32", BF16: "bf16"}

# --- tolerance families (max_atol, max_rtol); reasons in the module docstring ---------------
TOL_EW_F32 = {"max_atol": 1e-5, "max_rtol": 1e-5}
TOL_EW_BF16 = {"max_atol": 1e-3, "max_rtol": 1e-2}
TOL_MM_F32 = {"max_atol": 1e-4, "max_rtol": 1e-4}
TOL_MM_BF16 = {"max_atol": 1e-2, "max_rtol": 1e-2}
TOL_CONV_F32 = {"max_atol": 2e-3, "max_rtol": 2e-3}
TOL_CONV_BF16 = {"max_atol": 1e-2, "max_rtol": 2e-2}
TOL_NORM_F32 = {"max_atol": 1e-4, "max_rtol": 1e-4}
TOL_NORM_BF16 = {"max_atol": 1e-2, "max_rtol": 1e-2}
TOL_EXACT = {"max_atol": 0.0, "max_rtol": 0.0, "required_matched_ratio": 1.0}
TOL_SELECT = {"max_atol": 1e-6, "max_rtol": 1e-6}


@dataclass
class Spec:
    """One problem, as reviewable data. ``run`` and ``make`` are Python source snippets
    (dedented) for the reference's ``run`` and ``make_inputs``; ``@DT@`` in them is replaced
    by the torch dtype of the variant."""

    name: str
    op_type: str
    description: str
    axes: dict  # name -> "var" | int (const) | str (expr)
    inputs: dict  # name -> (shape list, dtype)
    outputs: dict
    run: str
    make: str
    workloads: list  # list of (axes dict, tags list)
    tol: dict | Callable[[dict], dict]
    allow_tf32: bool | None = None
    constraints: list | None = None
    family: str = ""
    dtype: str = F32
    extra: dict = field(default_factory=dict)


SPECS: list[Spec] = []


def add(**kw) -> None:
    SPECS.append(Spec(**kw))


def cpu(axes: dict) -> tuple:
    return (axes, ["cpu"])


def gpu(axes: dict) -> tuple:
    return (axes, [])


def dedent(s: str) -> str:
    return textwrap.dedent(s).strip("\n") + "\n"


# =========================================================================================
# GEMM family
# =========================================================================================
def _gemm() -> None:
    for dt, tol, sizes in (
        (F32, TOL_MM_F32, [64, 1024, 2048, 4096]),
        (BF16, TOL_MM_BF16, [64, 2048, 4096, 8192]),
    ):
        add(
            name=f"matmul_square_{SHORT[dt]}", op_type="gemm", family="matmul", dtype=dt,
            description="C = A @ B for square N x N matrices.",
            axes={"N": "var"},
            inputs={"A": (["N", "N"], dt), "B": (["N", "N"], dt)},
            outputs={"C": (["N", "N"], dt)},
            run="""
            @torch.no_grad()
            def run(A, B):
                return torch.matmul(A, B)
            """,
            make="""
            def make_inputs(axes, device):
                n = axes["N"]
                A = torch.randn(n, n, device=device)
                B = torch.randn(n, n, device=device) / n ** 0.5
                return {"A": A.to(@DT@), "B": B.to(@DT@)}
            """,
            workloads=[cpu({"N": sizes[0]})] + [gpu({"N": n}) for n in sizes[1:]],
            tol=tol,
        )

    add(
        name="matmul_tall_skinny_fp32", op_type="gemm", family="matmul",
        description="C = A @ B with M >> K, N (tall-skinny A, e.g. a projection over many "
                    "tokens to a few outputs).",
        axes={"M": "var", "K": "var", "N": "var"},
        inputs={"A": (["M", "K"], F32), "B": (["K", "N"], F32)},
        outputs={"C": (["M", "N"], F32)},
        run="""
        @torch.no_grad()
        def run(A, B):
            return torch.matmul(A, B)
        """,
        make="""
        def make_inputs(axes, device):
            m, k, n = axes["M"], axes["K"], axes["N"]
            A = torch.randn(m, k, device=device)
            B = torch.randn(k, n, device=device) / k ** 0.5
            return {"A": A, "B": B}
        """,
        workloads=[cpu({"M": 512, "K": 64, "N": 16}), gpu({"M": 32768, "K": 256, "N": 64}),
                   gpu({"M": 131072, "K": 128, "N": 32}), gpu({"M": 65536, "K": 512, "N": 16})],
        tol=TOL_MM_F32,
    )

    for dt, tol, wls in (
        (F32, TOL_MM_F32, [(4, 32, 48, 40), (32, 512, 512, 512), (128, 256, 64, 256),
                           (16, 1024, 1024, 1024)]),
        (BF16, TOL_MM_BF16, [(4, 32, 48, 40), (64, 1024, 128, 1024), (256, 512, 64, 512),
                             (32, 2048, 128, 2048)]),
    ):
        add(
            name=f"matmul_batched_{SHORT[dt]}", op_type="gemm", family="matmul", dtype=dt,
            description="Batched C[b] = A[b] @ B[b] (attention-like score and context "
                        "products for the bf16 variant).",
            axes={"batch": "var", "M": "var", "K": "var", "N": "var"},
            inputs={"A": (["batch", "M", "K"], dt), "B": (["batch", "K", "N"], dt)},
            outputs={"C": (["batch", "M", "N"], dt)},
            run="""
            @torch.no_grad()
            def run(A, B):
                return torch.bmm(A, B)
            """,
            make="""
            def make_inputs(axes, device):
                b, m, k, n = axes["batch"], axes["M"], axes["K"], axes["N"]
                A = torch.randn(b, m, k, device=device)
                B = torch.randn(b, k, n, device=device) / k ** 0.5
                return {"A": A.to(@DT@), "B": B.to(@DT@)}
            """,
            workloads=[cpu(dict(zip(("batch", "M", "K", "N"), wls[0])))]
            + [gpu(dict(zip(("batch", "M", "K", "N"), w))) for w in wls[1:]],
            tol=tol,
        )

    for dt, tol, wls in (
        (F32, TOL_MM_F32, [(256, 512), (4096, 4096), (11008, 4096), (4096, 14336)]),
        (BF16, TOL_MM_BF16, [(256, 512), (4096, 4096), (14336, 4096), (32000, 4096)]),
    ):
        add(
            name=f"matvec_{SHORT[dt]}", op_type="gemv", family="matmul", dtype=dt,
            description="y = A @ x, matrix-vector product (LLM decode with batch 1: "
                        "LLaMA-7B/8B projection shapes).",
            axes={"M": "var", "K": "var"},
            inputs={"A": (["M", "K"], dt), "x": (["K"], dt)},
            outputs={"y": (["M"], dt)},
            run="""
            @torch.no_grad()
            def run(A, x):
                return torch.mv(A, x)
            """,
            make="""
            def make_inputs(axes, device):
                m, k = axes["M"], axes["K"]
                A = torch.randn(m, k, device=device) / k ** 0.5
                x = torch.randn(k, device=device)
                return {"A": A.to(@DT@), "x": x.to(@DT@)}
            """,
            workloads=[cpu({"M": wls[0][0], "K": wls[0][1]})]
            + [gpu({"M": m, "K": k}) for m, k in wls[1:]],
            tol=tol,
        )

    for dt, tol, wls in (
        (F32, TOL_MM_F32, [(2, 16, 64, 48), (8, 512, 1024, 1024), (4, 1024, 768, 3072),
                           (16, 128, 2048, 512)]),
        (BF16, TOL_MM_BF16, [(2, 16, 64, 48), (4, 2048, 4096, 4096), (8, 512, 4096, 11008),
                             (1, 4096, 4096, 14336)]),
    ):
        add(
            name=f"matmul_3d_tensor_matrix_{SHORT[dt]}", op_type="gemm", family="matmul",
            dtype=dt,
            description="Y = X @ W for a 3-D activation X [batch, seq, K] and a weight "
                        "W [K, N] (a linear layer without bias).",
            axes={"batch": "var", "seq": "var", "K": "var", "N": "var"},
            inputs={"X": (["batch", "seq", "K"], dt), "W": (["K", "N"], dt)},
            outputs={"Y": (["batch", "seq", "N"], dt)},
            run="""
            @torch.no_grad()
            def run(X, W):
                return torch.matmul(X, W)
            """,
            make="""
            def make_inputs(axes, device):
                b, s, k, n = axes["batch"], axes["seq"], axes["K"], axes["N"]
                X = torch.randn(b, s, k, device=device)
                W = torch.randn(k, n, device=device) / k ** 0.5
                return {"X": X.to(@DT@), "W": W.to(@DT@)}
            """,
            workloads=[cpu(dict(zip(("batch", "seq", "K", "N"), wls[0])))]
            + [gpu(dict(zip(("batch", "seq", "K", "N"), w))) for w in wls[1:]],
            tol=tol,
        )

    add(
        name="linear_bias_bf16", op_type="gemm", family="matmul", dtype=BF16,
        description="Y = X @ W^T + b, nn.Linear with a bias (W stored [N, K], transposed "
                    "operand), BERT-base/LLaMA shapes.",
        axes={"M": "var", "K": "var", "N": "var"},
        inputs={"X": (["M", "K"], BF16), "W": (["N", "K"], BF16), "b": (["N"], BF16)},
        outputs={"Y": (["M", "N"], BF16)},
        run="""
        @torch.no_grad()
        def run(X, W, b):
            return F.linear(X, W, b)
        """,
        make="""
        def make_inputs(axes, device):
            m, k, n = axes["M"], axes["K"], axes["N"]
            X = torch.randn(m, k, device=device)
            W = torch.randn(n, k, device=device) / k ** 0.5
            b = torch.randn(n, device=device)
            return {"X": X.to(@DT@), "W": W.to(@DT@), "b": b.to(@DT@)}
        """,
        workloads=[cpu({"M": 64, "K": 96, "N": 80}), gpu({"M": 8192, "K": 768, "N": 3072}),
                   gpu({"M": 8192, "K": 3072, "N": 768}), gpu({"M": 4096, "K": 4096, "N": 4096})],
        tol=TOL_MM_BF16,
    )

    add(
        name="matmul_diag_scale_fp32", op_type="elementwise", family="matmul",
        description="C = diag(d) @ B: scale row i of B by d[i] (KernelBench's diagonal "
                    "matmul; an O(N*M) problem disguised as a GEMM).",
        axes={"N": "var", "M": "var"},
        inputs={"d": (["N"], F32), "B": (["N", "M"], F32)},
        outputs={"C": (["N", "M"], F32)},
        run="""
        @torch.no_grad()
        def run(d, B):
            return torch.diag(d) @ B
        """,
        make="""
        def make_inputs(axes, device):
            n, m = axes["N"], axes["M"]
            d = torch.randn(n, device=device) * 2.0
            B = torch.randn(n, m, device=device)
            return {"d": d, "B": B}
        """,
        workloads=[cpu({"N": 64, "M": 96}), gpu({"N": 4096, "M": 4096}),
                   gpu({"N": 16384, "M": 4096}), gpu({"N": 4096, "M": 16384})],
        tol=TOL_EW_F32,
    )

    for tri, fn, desc in (("lower", "tril", "lower"), ("upper", "triu", "upper")):
        add(
            name=f"matmul_triangular_{tri}_fp32", op_type="gemm", family="matmul",
            description=f"C = {fn}(A @ B) for {desc}-triangular A and B (the product of "
                        f"two {desc}-triangular matrices is {desc}-triangular; about 1/6 of "
                        "the dense FLOPs are needed).",
            axes={"N": "var"},
            inputs={"A": (["N", "N"], F32), "B": (["N", "N"], F32)},
            outputs={"C": (["N", "N"], F32)},
            run=f"""
            @torch.no_grad()
            def run(A, B):
                return torch.{fn}(torch.matmul(A, B))
            """,
            make=f"""
            def make_inputs(axes, device):
                n = axes["N"]
                A = torch.{fn}(torch.randn(n, n, device=device))
                B = torch.{fn}(torch.randn(n, n, device=device)) / n ** 0.5
                return {{"A": A, "B": B}}
            """,
            workloads=[cpu({"N": 64}), gpu({"N": 2048}), gpu({"N": 4096})],
            tol=TOL_MM_F32,
        )

    add(
        name="matmul_irregular_fp32", op_type="gemm", family="matmul",
        description="C = A @ B with sizes that are not multiples of any tile size.",
        axes={"M": "var", "K": "var", "N": "var"},
        inputs={"A": (["M", "K"], F32), "B": (["K", "N"], F32)},
        outputs={"C": (["M", "N"], F32)},
        run="""
        @torch.no_grad()
        def run(A, B):
            return torch.matmul(A, B)
        """,
        make="""
        def make_inputs(axes, device):
            m, k, n = axes["M"], axes["K"], axes["N"]
            A = torch.randn(m, k, device=device)
            B = torch.randn(k, n, device=device) / k ** 0.5
            return {"A": A, "B": B}
        """,
        workloads=[cpu({"M": 67, "K": 45, "N": 93}), gpu({"M": 8205, "K": 2949, "N": 5921}),
                   gpu({"M": 1023, "K": 4097, "N": 999}), gpu({"M": 3001, "K": 127, "N": 5003})],
        tol=TOL_MM_F32,
    )

    add(
        name="matmul_small_k_bf16", op_type="gemm", family="matmul", dtype=BF16,
        description="C = A @ B with a small inner dimension K (a rank-K update; bound by "
                    "writing C, not by FLOPs).",
        axes={"M": "var", "K": "var", "N": "var"},
        inputs={"A": (["M", "K"], BF16), "B": (["K", "N"], BF16)},
        outputs={"C": (["M", "N"], BF16)},
        run="""
        @torch.no_grad()
        def run(A, B):
            return torch.matmul(A, B)
        """,
        make="""
        def make_inputs(axes, device):
            m, k, n = axes["M"], axes["K"], axes["N"]
            A = torch.randn(m, k, device=device)
            B = torch.randn(k, n, device=device) / k ** 0.5
            return {"A": A.to(@DT@), "B": B.to(@DT@)}
        """,
        workloads=[cpu({"M": 128, "K": 16, "N": 128}), gpu({"M": 8192, "K": 64, "N": 8192}),
                   gpu({"M": 16384, "K": 32, "N": 4096}), gpu({"M": 4096, "K": 128, "N": 4096})],
        tol=TOL_MM_BF16,
    )

    add(
        name="matmul_transposed_a_fp32", op_type="gemm", family="matmul",
        description="C = A^T @ B with A stored [K, M] (a weight-gradient-style product).",
        axes={"M": "var", "K": "var", "N": "var"},
        inputs={"A": (["K", "M"], F32), "B": (["K", "N"], F32)},
        outputs={"C": (["M", "N"], F32)},
        run="""
        @torch.no_grad()
        def run(A, B):
            return torch.matmul(A.T, B)
        """,
        make="""
        def make_inputs(axes, device):
            m, k, n = axes["M"], axes["K"], axes["N"]
            A = torch.randn(k, m, device=device)
            B = torch.randn(k, n, device=device) / k ** 0.5
            return {"A": A, "B": B}
        """,
        workloads=[cpu({"M": 32, "K": 48, "N": 40}), gpu({"M": 1024, "K": 8192, "N": 1024}),
                   gpu({"M": 4096, "K": 2048, "N": 1024}), gpu({"M": 768, "K": 16384, "N": 3072})],
        tol=TOL_MM_F32,
    )


# =========================================================================================
# Activations (elementwise, softmax family)
# =========================================================================================
ACT_SIZES = [(8, 1000), (4096, 4096), (8192, 4096), (2048, 11008)]

#: name -> (expression in x, input scale, dtypes, description)
ACTIVATIONS = {
    "relu": ("torch.relu(x)", 1.0, (F32, BF16), "ReLU: max(x, 0)"),
    "leaky_relu": ("F.leaky_relu(x, negative_slope=0.01)", 2.0, (F32,),
                   "LeakyReLU with slope 0.01"),
    "elu": ("F.elu(x, alpha=1.0)", 2.0, (F32,), "ELU with alpha 1"),
    "selu": ("F.selu(x)", 2.0, (F32,), "SELU (scale 1.0507, alpha 1.6733)"),
    "gelu": ("F.gelu(x)", 3.0, (F32, BF16), "GELU, exact (erf) form"),
    "gelu_tanh": ("F.gelu(x, approximate='tanh')", 3.0, (F32,),
                  "GELU, tanh approximation (GPT-2 / minGPT 'NewGELU')"),
    "silu": ("F.silu(x)", 4.0, (F32, BF16), "SiLU / swish: x * sigmoid(x)"),
    "sigmoid": ("torch.sigmoid(x)", 4.0, (F32,), "logistic sigmoid"),
    "tanh": ("torch.tanh(x)", 2.0, (F32,), "tanh"),
    "softplus": ("F.softplus(x)", 8.0, (F32,),
                 "softplus log(1 + exp(x)) (linear above 20; inputs reach both regimes)"),
    "softsign": ("F.softsign(x)", 4.0, (F32,), "softsign x / (1 + |x|)"),
    "hardtanh": ("F.hardtanh(x, min_val=-1.0, max_val=1.0)", 2.0, (F32,),
                 "hardtanh clamp to [-1, 1]"),
    "hardsigmoid": ("F.hardsigmoid(x)", 4.0, (F32,), "hard sigmoid relu6(x + 3) / 6"),
    "hardswish": ("F.hardswish(x)", 4.0, (F32,), "hard swish x * relu6(x + 3) / 6"),
}


def _activations() -> None:
    for op, (expr, scale, dts, desc) in ACTIVATIONS.items():
        for dt in dts:
            add(
                name=f"{op}_{SHORT[dt]}", op_type="activation", family="activation", dtype=dt,
                description=f"{desc}, elementwise over a [rows, cols] activation. Inputs are "
                            f"N(0, {scale:g}^2) so every region of the function is reached.",
                axes={"rows": "var", "cols": "var"},
                inputs={"x": (["rows", "cols"], dt)},
                outputs={"y": (["rows", "cols"], dt)},
                run=f"""
                @torch.no_grad()
                def run(x):
                    return {expr}
                """,
                make=f"""
                def make_inputs(axes, device):
                    x = torch.randn(axes["rows"], axes["cols"], device=device) * {scale!r}
                    return {{"x": x.to(@DT@)}}
                """,
                workloads=[cpu({"rows": ACT_SIZES[0][0], "cols": ACT_SIZES[0][1]})]
                + [gpu({"rows": r, "cols": c}) for r, c in ACT_SIZES[1:]],
                tol=TOL_EW_F32 if dt == F32 else TOL_EW_BF16,
            )

    # softmax over long rows: outputs are ~1/V, so atol is scaled by 1/V (threats.md names
    # "row-softmax over very long rows" as a known degenerate problem under a fixed atol).
    smax_sizes = [(8, 1000), (4096, 4096), (1024, 32000), (256, 128256)]
    for dt in (F32, BF16):
        c = 1e-5 if dt == F32 else 1e-4
        rtol = 1e-4 if dt == F32 else 1e-2
        add(
            name=f"softmax_{SHORT[dt]}", op_type="softmax", family="activation", dtype=dt,
            description="Row softmax over the last dim (attention-score and vocabulary "
                        "widths). Logits are N(0, 3^2); atol is 1e-5/V (fp32) or 1e-4/V "
                        "(bf16) because outputs are ~1/V.",
            axes={"rows": "var", "V": "var"},
            inputs={"x": (["rows", "V"], dt)},
            outputs={"y": (["rows", "V"], dt)},
            run="""
            @torch.no_grad()
            def run(x):
                return torch.softmax(x, dim=-1)
            """,
            make="""
            def make_inputs(axes, device):
                x = torch.randn(axes["rows"], axes["V"], device=device) * 3.0
                return {"x": x.to(@DT@)}
            """,
            workloads=[cpu({"rows": smax_sizes[0][0], "V": smax_sizes[0][1]})]
            + [gpu({"rows": r, "V": v}) for r, v in smax_sizes[1:]],
            tol=(lambda a, c=c, rtol=rtol: {"max_atol": c / a["V"], "max_rtol": rtol}),
        )
    add(
        name="log_softmax_fp32", op_type="softmax", family="activation",
        description="Row log-softmax over the last dim. Logits are N(0, 3^2).",
        axes={"rows": "var", "V": "var"},
        inputs={"x": (["rows", "V"], F32)},
        outputs={"y": (["rows", "V"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return torch.log_softmax(x, dim=-1)
        """,
        make="""
        def make_inputs(axes, device):
            x = torch.randn(axes["rows"], axes["V"], device=device) * 3.0
            return {"x": x}
        """,
        workloads=[cpu({"rows": 8, "V": 1000})]
        + [gpu({"rows": r, "V": v}) for r, v in smax_sizes[1:]],
        tol={"max_atol": 1e-4, "max_rtol": 1e-5},
    )


# =========================================================================================
# Normalisations
# =========================================================================================
# rows of x get their own scale (log-uniform over [0.1, 10]) and offset, so a passthrough
# of x (or of x standardised with the wrong statistics) cannot pass.
ROWS_XFORM = """
    s = torch.exp(torch.empty({shape}, device=device).uniform_(-2.3, 2.3))
    mu = torch.randn({shape}, device=device) * 2.0
"""


def _norms() -> None:
    ln_sizes = [(16, 256), (8192, 768), (4096, 4096), (2048, 8192)]
    for dt in (F32, BF16):
        add(
            name=f"layer_norm_{SHORT[dt]}", op_type="layernorm", family="norm", dtype=dt,
            description="LayerNorm over the last dim with affine weight and bias, eps 1e-5 "
                        "(BERT-base, LLaMA-7B, LLaMA-70B-ish widths). Rows have their own "
                        "scale and offset.",
            axes={"rows": "var", "D": "var"},
            inputs={"x": (["rows", "D"], dt), "gamma": (["D"], dt), "beta": (["D"], dt)},
            outputs={"y": (["rows", "D"], dt)},
            run="""
            @torch.no_grad()
            def run(x, gamma, beta):
                return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps=1e-5)
            """,
            make="""
            def make_inputs(axes, device):
                r, d = axes["rows"], axes["D"]
                s = torch.exp(torch.empty(r, 1, device=device).uniform_(-2.3, 2.3))
                mu = torch.randn(r, 1, device=device) * 2.0
                x = torch.randn(r, d, device=device) * s + mu
                gamma = 1.0 + 0.2 * torch.randn(d, device=device)
                beta = 0.2 * torch.randn(d, device=device)
                return {"x": x.to(@DT@), "gamma": gamma.to(@DT@), "beta": beta.to(@DT@)}
            """,
            workloads=[cpu({"rows": ln_sizes[0][0], "D": ln_sizes[0][1]})]
            + [gpu({"rows": r, "D": d}) for r, d in ln_sizes[1:]],
            tol=TOL_NORM_F32 if dt == F32 else TOL_NORM_BF16,
        )
        add(
            name=f"rms_norm_{SHORT[dt]}", op_type="rmsnorm", family="norm", dtype=dt,
            description="RMSNorm over the last dim: x * rsqrt(mean(x^2) + 1e-6) * weight, "
                        "computed in fp32 and cast back (LLaMA convention). Rows have their "
                        "own scale.",
            axes={"rows": "var", "D": "var"},
            inputs={"x": (["rows", "D"], dt), "gamma": (["D"], dt)},
            outputs={"y": (["rows", "D"], dt)},
            run="""
            @torch.no_grad()
            def run(x, gamma):
                xf = x.float()
                y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
                return (y * gamma.float()).to(x.dtype)
            """,
            make="""
            def make_inputs(axes, device):
                r, d = axes["rows"], axes["D"]
                s = torch.exp(torch.empty(r, 1, device=device).uniform_(-2.3, 2.3))
                x = (torch.randn(r, d, device=device) + 0.5) * s
                gamma = 1.0 + 0.2 * torch.randn(d, device=device)
                return {"x": x.to(@DT@), "gamma": gamma.to(@DT@)}
            """,
            workloads=[cpu({"rows": ln_sizes[0][0], "D": ln_sizes[0][1]})]
            + [gpu({"rows": r, "D": d}) for r, d in ln_sizes[1:]],
            tol=TOL_NORM_F32 if dt == F32 else TOL_NORM_BF16,
        )

    nchw = """
            def make_inputs(axes, device):
                n, c, h, w = axes["N"], axes["C"], axes["H"], axes["W"]
                s = torch.exp(torch.empty(1, c, 1, 1, device=device).uniform_(-2.3, 2.3))
                mu = torch.randn(1, c, 1, 1, device=device) * 2.0
                x = torch.randn(n, c, h, w, device=device) * s + mu
                gamma = 1.0 + 0.2 * torch.randn(c, device=device)
                beta = 0.2 * torch.randn(c, device=device)
                return {"x": x, "gamma": gamma, "beta": beta}
    """
    add(
        name="batch_norm_fp32", op_type="batchnorm", family="norm",
        description="BatchNorm2d forward in training mode: per-channel batch mean and "
                    "biased variance over (N, H, W), eps 1e-5, affine (ResNet-50 shapes). "
                    "Channels have their own scale and offset.",
        axes={"N": "var", "C": "var", "H": "var", "W": "var"},
        inputs={"x": (["N", "C", "H", "W"], F32), "gamma": (["C"], F32), "beta": (["C"], F32)},
        outputs={"y": (["N", "C", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x, gamma, beta):
            return F.batch_norm(x, None, None, gamma, beta, training=True, eps=1e-5)
        """,
        make=nchw,
        workloads=[cpu({"N": 4, "C": 8, "H": 8, "W": 8}), gpu({"N": 32, "C": 64, "H": 112, "W": 112}),
                   gpu({"N": 64, "C": 256, "H": 28, "W": 28}), gpu({"N": 128, "C": 512, "H": 7, "W": 7})],
        tol=TOL_NORM_F32,
    )
    add(
        name="group_norm_fp32", op_type="groupnorm", family="norm",
        description="GroupNorm with G = 32 groups (Stable Diffusion UNet), eps 1e-5, affine. "
                    "Channels have their own scale and offset.",
        axes={"N": "var", "C": "var", "H": "var", "W": "var", "G": 32},
        constraints=["C % G == 0"],
        inputs={"x": (["N", "C", "H", "W"], F32), "gamma": (["C"], F32), "beta": (["C"], F32)},
        outputs={"y": (["N", "C", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x, gamma, beta):
            return F.group_norm(x, 32, gamma, beta, eps=1e-5)
        """,
        make=nchw,
        workloads=[cpu({"N": 2, "C": 64, "H": 4, "W": 4}),
                   gpu({"N": 8, "C": 320, "H": 64, "W": 64}),
                   gpu({"N": 8, "C": 640, "H": 32, "W": 32}),
                   gpu({"N": 16, "C": 1280, "H": 16, "W": 16})],
        tol=TOL_NORM_F32,
    )
    add(
        name="instance_norm_fp32", op_type="instancenorm", family="norm",
        description="InstanceNorm2d without affine parameters (style transfer): per-(n, c) "
                    "mean and biased variance over (H, W), eps 1e-5. Channels have their "
                    "own scale and offset.",
        axes={"N": "var", "C": "var", "H": "var", "W": "var"},
        inputs={"x": (["N", "C", "H", "W"], F32)},
        outputs={"y": (["N", "C", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.instance_norm(x, eps=1e-5)
        """,
        make="""
        def make_inputs(axes, device):
            n, c, h, w = axes["N"], axes["C"], axes["H"], axes["W"]
            s = torch.exp(torch.empty(n, c, 1, 1, device=device).uniform_(-2.3, 2.3))
            mu = torch.randn(n, c, 1, 1, device=device) * 2.0
            x = torch.randn(n, c, h, w, device=device) * s + mu
            return {"x": x}
        """,
        workloads=[cpu({"N": 2, "C": 4, "H": 16, "W": 16}), gpu({"N": 16, "C": 64, "H": 128, "W": 128}),
                   gpu({"N": 8, "C": 128, "H": 64, "W": 64}), gpu({"N": 4, "C": 256, "H": 32, "W": 32})],
        tol=TOL_NORM_F32,
    )

    vec_sizes = [(16, 512), (4096, 4096), (1024, 32768), (65536, 256)]
    for op, expr, scale_fn, desc in (
        ("l1", "x / torch.sum(torch.abs(x), dim=1, keepdim=True)", lambda a: 1.0 / a["D"],
         "L1 normalisation of each row: x / sum|x|; outputs are ~1/D, atol 1e-4/D"),
        ("l2", "x / torch.norm(x, p=2, dim=1, keepdim=True)", lambda a: a["D"] ** -0.5,
         "L2 normalisation of each row: x / ||x||_2; outputs are ~1/sqrt(D), atol "
         "1e-4/sqrt(D)"),
    ):
        add(
            name=f"{op}_norm_fp32", op_type="normalize", family="norm",
            description=desc + ". Rows have their own scale and offset.",
            axes={"rows": "var", "D": "var"},
            inputs={"x": (["rows", "D"], F32)},
            outputs={"y": (["rows", "D"], F32)},
            run=f"""
            @torch.no_grad()
            def run(x):
                return {expr}
            """,
            make="""
            def make_inputs(axes, device):
                r, d = axes["rows"], axes["D"]
                s = torch.exp(torch.empty(r, 1, device=device).uniform_(-2.3, 2.3))
                x = (torch.randn(r, d, device=device) + 0.3) * s
                return {"x": x}
            """,
            workloads=[cpu({"rows": vec_sizes[0][0], "D": vec_sizes[0][1]})]
            + [gpu({"rows": r, "D": d}) for r, d in vec_sizes[1:]],
            tol=(lambda a, f=scale_fn: {"max_atol": 1e-4 * f(a), "max_rtol": 1e-4}),
        )
    add(
        name="frobenius_norm_fp32", op_type="normalize", family="norm",
        description="x / ||x||_F over the whole tensor (one global reduction, accumulated "
                    "in float64 by the reference, then a scale). Outputs are "
                    "~1/sqrt(numel), so atol is 1e-4/sqrt(numel).",
        axes={"N": "var", "C": "var", "H": "var", "W": "var"},
        inputs={"x": (["N", "C", "H", "W"], F32)},
        outputs={"y": (["N", "C", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            # the one global sum of squares is accumulated in float64: CPU torch.norm in
            # fp32 is >1e-3 off at 16M elements (measured), which no tolerance should absorb
            return x / torch.linalg.vector_norm(x, dtype=torch.float64).to(x.dtype)
        """,
        make="""
        def make_inputs(axes, device):
            n, c, h, w = axes["N"], axes["C"], axes["H"], axes["W"]
            s = torch.exp(torch.empty(1, c, 1, 1, device=device).uniform_(-2.3, 2.3))
            x = torch.randn(n, c, h, w, device=device) * s
            return {"x": x}
        """,
        workloads=[cpu({"N": 2, "C": 8, "H": 16, "W": 16}), gpu({"N": 16, "C": 64, "H": 128, "W": 128}),
                   gpu({"N": 32, "C": 256, "H": 32, "W": 32}), gpu({"N": 8, "C": 512, "H": 56, "W": 56})],
        tol=lambda a: {"max_atol": 1e-4 * (a["N"] * a["C"] * a["H"] * a["W"]) ** -0.5,
                       "max_rtol": 1e-4},
    )


# =========================================================================================
# Pooling
# =========================================================================================
def _pooling() -> None:
    add(
        name="max_pool1d_fp32", op_type="pooling", family="pooling",
        description="MaxPool1d kernel 3, stride 2, padding 1 over [N, C, L].",
        axes={"N": "var", "C": "var", "L": "var", "Lo": "(L - 1) // 2 + 1"},
        inputs={"x": (["N", "C", "L"], F32)},
        outputs={"y": (["N", "C", "Lo"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.max_pool1d(x, kernel_size=3, stride=2, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            return {"x": torch.randn(axes["N"], axes["C"], axes["L"], device=device)}
        """,
        workloads=[cpu({"N": 4, "C": 8, "L": 64}), gpu({"N": 32, "C": 128, "L": 4096}),
                   gpu({"N": 64, "C": 256, "L": 2048}), gpu({"N": 16, "C": 64, "L": 32767})],
        tol=TOL_SELECT,
    )
    for dt in (F32, BF16):
        add(
            name=f"max_pool2d_{SHORT[dt]}", op_type="pooling", family="pooling", dtype=dt,
            description="MaxPool2d kernel 3, stride 2, padding 1 (the ResNet stem pool).",
            axes={"N": "var", "C": "var", "H": "var", "W": "var",
                  "Ho": "(H - 1) // 2 + 1", "Wo": "(W - 1) // 2 + 1"},
            inputs={"x": (["N", "C", "H", "W"], dt)},
            outputs={"y": (["N", "C", "Ho", "Wo"], dt)},
            run="""
            @torch.no_grad()
            def run(x):
                return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
            """,
            make="""
            def make_inputs(axes, device):
                x = torch.randn(axes["N"], axes["C"], axes["H"], axes["W"], device=device)
                return {"x": x.to(@DT@)}
            """,
            workloads=[cpu({"N": 2, "C": 4, "H": 16, "W": 16}),
                       gpu({"N": 32, "C": 64, "H": 112, "W": 112}),
                       gpu({"N": 16, "C": 256, "H": 56, "W": 56}),
                       gpu({"N": 8, "C": 96, "H": 147, "W": 147})],
            tol=TOL_SELECT,
        )
    add(
        name="max_pool3d_fp32", op_type="pooling", family="pooling",
        description="MaxPool3d kernel 3, stride 2, padding 1 over [N, C, D, H, W].",
        axes={"N": "var", "C": "var", "D": "var", "H": "var", "W": "var",
              "Do": "(D - 1) // 2 + 1", "Ho": "(H - 1) // 2 + 1", "Wo": "(W - 1) // 2 + 1"},
        inputs={"x": (["N", "C", "D", "H", "W"], F32)},
        outputs={"y": (["N", "C", "Do", "Ho", "Wo"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.max_pool3d(x, kernel_size=3, stride=2, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            x = torch.randn(axes["N"], axes["C"], axes["D"], axes["H"], axes["W"], device=device)
            return {"x": x}
        """,
        workloads=[cpu({"N": 2, "C": 2, "D": 8, "H": 8, "W": 8}),
                   gpu({"N": 8, "C": 32, "D": 32, "H": 64, "W": 64}),
                   gpu({"N": 4, "C": 64, "D": 16, "H": 56, "W": 56}),
                   gpu({"N": 2, "C": 16, "D": 64, "H": 96, "W": 96})],
        tol=TOL_SELECT,
    )
    add(
        name="avg_pool1d_fp32", op_type="pooling", family="pooling",
        description="AvgPool1d kernel 4, stride 2, padding 1 (zero padding counted).",
        axes={"N": "var", "C": "var", "L": "var", "Lo": "(L + 2 - 4) // 2 + 1"},
        constraints=["L >= 4"],
        inputs={"x": (["N", "C", "L"], F32)},
        outputs={"y": (["N", "C", "Lo"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.avg_pool1d(x, kernel_size=4, stride=2, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            return {"x": torch.randn(axes["N"], axes["C"], axes["L"], device=device)}
        """,
        workloads=[cpu({"N": 4, "C": 8, "L": 64}), gpu({"N": 32, "C": 128, "L": 4096}),
                   gpu({"N": 64, "C": 256, "L": 2048}), gpu({"N": 16, "C": 64, "L": 32767})],
        tol=TOL_EW_F32,
    )
    add(
        name="avg_pool2d_fp32", op_type="pooling", family="pooling",
        description="AvgPool2d kernel 3, stride 2, padding 1 (zero padding counted).",
        axes={"N": "var", "C": "var", "H": "var", "W": "var",
              "Ho": "(H - 1) // 2 + 1", "Wo": "(W - 1) // 2 + 1"},
        inputs={"x": (["N", "C", "H", "W"], F32)},
        outputs={"y": (["N", "C", "Ho", "Wo"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.avg_pool2d(x, kernel_size=3, stride=2, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            return {"x": torch.randn(axes["N"], axes["C"], axes["H"], axes["W"], device=device)}
        """,
        workloads=[cpu({"N": 2, "C": 4, "H": 16, "W": 16}), gpu({"N": 32, "C": 64, "H": 112, "W": 112}),
                   gpu({"N": 16, "C": 256, "H": 56, "W": 56}), gpu({"N": 8, "C": 96, "H": 147, "W": 147})],
        tol=TOL_EW_F32,
    )
    add(
        name="avg_pool3d_fp32", op_type="pooling", family="pooling",
        description="AvgPool3d kernel 2, stride 2 (3-D U-Net downsampling).",
        axes={"N": "var", "C": "var", "D": "var", "H": "var", "W": "var",
              "Do": "D // 2", "Ho": "H // 2", "Wo": "W // 2"},
        inputs={"x": (["N", "C", "D", "H", "W"], F32)},
        outputs={"y": (["N", "C", "Do", "Ho", "Wo"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return F.avg_pool3d(x, kernel_size=2, stride=2)
        """,
        make="""
        def make_inputs(axes, device):
            x = torch.randn(axes["N"], axes["C"], axes["D"], axes["H"], axes["W"], device=device)
            return {"x": x}
        """,
        workloads=[cpu({"N": 2, "C": 2, "D": 8, "H": 8, "W": 8}),
                   gpu({"N": 8, "C": 32, "D": 32, "H": 64, "W": 64}),
                   gpu({"N": 4, "C": 64, "D": 16, "H": 56, "W": 56}),
                   gpu({"N": 2, "C": 16, "D": 64, "H": 96, "W": 96})],
        tol=TOL_EW_F32,
    )


# =========================================================================================
# Reductions
# =========================================================================================
def _reductions() -> None:
    add(
        name="sum_dim1_fp32", op_type="reduction", family="reduction",
        description="Sum over the middle dim of [B, R, C] (a strided reduction). Inputs have "
                    "a per-(b, c) offset; atol is 1e-6 * R.",
        axes={"B": "var", "R": "var", "C": "var"},
        inputs={"x": (["B", "R", "C"], F32)},
        outputs={"y": (["B", "C"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return torch.sum(x, dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, r, c = axes["B"], axes["R"], axes["C"]
            mu = torch.randn(b, 1, c, device=device) * 0.5
            return {"x": torch.randn(b, r, c, device=device) + mu}
        """,
        workloads=[cpu({"B": 4, "R": 32, "C": 48}), gpu({"B": 32, "R": 1024, "C": 1024}),
                   gpu({"B": 8, "R": 16384, "C": 256}), gpu({"B": 1024, "R": 64, "C": 512})],
        tol=lambda a: {"max_atol": 1e-6 * a["R"], "max_rtol": 1e-4},
    )
    row_sizes = [(32, 256), (16384, 4096), (4096, 16384), (262144, 64)]
    row_make = """
        def make_inputs(axes, device):
            m, n = axes["M"], axes["N"]
            s = torch.exp(torch.empty(m, 1, device=device).uniform_(-1.5, 1.5))
            mu = torch.randn(m, 1, device=device) * 2.0
            return {"x": torch.randn(m, n, device=device) * s + mu}
    """
    for op, expr, odt, tol, desc in (
        ("mean", "torch.mean(x, dim=-1)", F32, {"max_atol": 1e-5, "max_rtol": 1e-4},
         "Mean over the last dim"),
        ("max", "torch.amax(x, dim=-1)", F32, TOL_SELECT, "Max over the last dim"),
        ("min", "torch.amin(x, dim=-1)", F32, TOL_SELECT, "Min over the last dim"),
        ("argmax", "torch.argmax(x, dim=-1)", "int64", TOL_EXACT,
         "Index of the max over the last dim (first index on ties)"),
        ("argmin", "torch.argmin(x, dim=-1)", "int64", TOL_EXACT,
         "Index of the min over the last dim (first index on ties)"),
    ):
        add(
            name=f"{op}_dim_fp32", op_type="reduction", family="reduction",
            description=f"{desc} of [M, N]. Rows have their own scale and offset, so the "
                        "answer varies from row to row.",
            axes={"M": "var", "N": "var"},
            inputs={"x": (["M", "N"], F32)},
            outputs={"y": (["M"], odt)},
            run=f"""
            @torch.no_grad()
            def run(x):
                return {expr}
            """,
            make=row_make,
            workloads=[cpu({"M": row_sizes[0][0], "N": row_sizes[0][1]})]
            + [gpu({"M": m, "N": n}) for m, n in row_sizes[1:]],
            tol=tol,
        )
    add(
        name="prod_dim_fp32", op_type="reduction", family="reduction",
        description="Product over the last dim of [M, N]. Inputs are +-(1 + 0.1 z) with a "
                    "random sign, so products neither vanish nor overflow and take both signs.",
        axes={"M": "var", "N": "var"},
        inputs={"x": (["M", "N"], F32)},
        outputs={"y": (["M"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return torch.prod(x, dim=-1)
        """,
        make="""
        def make_inputs(axes, device):
            m, n = axes["M"], axes["N"]
            mag = 1.0 + 0.1 * torch.randn(m, n, device=device)
            sign = torch.where(torch.rand(m, n, device=device) < 0.5, -1.0, 1.0)
            return {"x": mag * sign}
        """,
        workloads=[cpu({"M": 64, "N": 64}), gpu({"M": 65536, "N": 256}),
                   gpu({"M": 16384, "N": 1024}), gpu({"M": 1048576, "N": 16})],
        tol={"max_atol": 1e-6, "max_rtol": 1e-4},
    )


# =========================================================================================
# Convolutions
# =========================================================================================
def _convs() -> None:
    conv2d_run = """
    @torch.no_grad()
    def run(x, w):
        return F.conv2d(x, w, stride={stride}, padding={padding}, dilation={dilation}, groups={groups})
    """

    def conv2d_make(groups_expr: str, k: int) -> str:
        return f"""
        def make_inputs(axes, device):
            n, ci, h, w_, co = axes["N"], axes["Cin"], axes["H"], axes["W"], axes["Cout"]
            g = {groups_expr}
            fan_in = (ci // g) * {k} * {k}
            x = torch.randn(n, ci, h, w_, device=device)
            w = torch.randn(co, ci // g, {k}, {k}, device=device) / fan_in ** 0.5
            return {{"x": x.to(@DT@), "w": w.to(@DT@)}}
        """

    std_wl = [(2, 8, 16, 16, 16), (32, 64, 56, 56, 64), (32, 128, 28, 28, 128),
              (16, 256, 14, 14, 256)]
    for dt in (F32, BF16):
        add(
            name=f"conv2d_3x3_{SHORT[dt]}", op_type="conv", family="conv", dtype=dt,
            description="Conv2d 3x3, stride 1, padding 1, no bias (ResNet-50 stage shapes).",
            axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "var"},
            inputs={"x": (["N", "Cin", "H", "W"], dt), "w": (["Cout", "Cin", 3, 3], dt)},
            outputs={"y": (["N", "Cout", "H", "W"], dt)},
            run=conv2d_run.format(stride=1, padding=1, dilation=1, groups=1),
            make=conv2d_make("1", 3),
            workloads=[cpu(dict(zip(("N", "Cin", "H", "W", "Cout"), std_wl[0])))]
            + [gpu(dict(zip(("N", "Cin", "H", "W", "Cout"), w))) for w in std_wl[1:]],
            tol=TOL_CONV_F32 if dt == F32 else TOL_CONV_BF16,
            allow_tf32=True if dt == F32 else None,
        )
    add(
        name="conv2d_depthwise_fp32", op_type="conv", family="conv",
        description="Depthwise Conv2d 3x3, stride 1, padding 1, groups = C (MobileNetV2 "
                    "shapes).",
        axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "Cin"},
        inputs={"x": (["N", "Cin", "H", "W"], F32), "w": (["Cout", 1, 3, 3], F32)},
        outputs={"y": (["N", "Cout", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x, w):
            return F.conv2d(x, w, stride=1, padding=1, groups=x.shape[1])
        """,
        make=conv2d_make("ci", 3),
        workloads=[cpu({"N": 2, "Cin": 8, "H": 16, "W": 16}), gpu({"N": 32, "Cin": 144, "H": 56, "W": 56}),
                   gpu({"N": 32, "Cin": 384, "H": 28, "W": 28}), gpu({"N": 64, "Cin": 960, "H": 7, "W": 7})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv2d_pointwise_fp32", op_type="conv", family="conv",
        description="Pointwise (1x1) Conv2d, no bias (ResNet-50 bottleneck and MobileNet "
                    "expansion shapes).",
        axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "var"},
        inputs={"x": (["N", "Cin", "H", "W"], F32), "w": (["Cout", "Cin", 1, 1], F32)},
        outputs={"y": (["N", "Cout", "H", "W"], F32)},
        run=conv2d_run.format(stride=1, padding=0, dilation=1, groups=1),
        make=conv2d_make("1", 1),
        workloads=[cpu({"N": 2, "Cin": 16, "H": 8, "W": 8, "Cout": 32}),
                   gpu({"N": 32, "Cin": 256, "H": 56, "W": 56, "Cout": 64}),
                   gpu({"N": 32, "Cin": 512, "H": 28, "W": 28, "Cout": 128}),
                   gpu({"N": 64, "Cin": 2048, "H": 7, "W": 7, "Cout": 512})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv2d_dilated_fp32", op_type="conv", family="conv",
        description="Dilated Conv2d 3x3, dilation 2, padding 2 (DeepLab atrous shapes).",
        axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "var"},
        inputs={"x": (["N", "Cin", "H", "W"], F32), "w": (["Cout", "Cin", 3, 3], F32)},
        outputs={"y": (["N", "Cout", "H", "W"], F32)},
        run=conv2d_run.format(stride=1, padding=2, dilation=2, groups=1),
        make=conv2d_make("1", 3),
        workloads=[cpu({"N": 1, "Cin": 8, "H": 16, "W": 16, "Cout": 8}),
                   gpu({"N": 8, "Cin": 256, "H": 64, "W": 64, "Cout": 256}),
                   gpu({"N": 16, "Cin": 512, "H": 33, "W": 33, "Cout": 256}),
                   gpu({"N": 4, "Cin": 128, "H": 129, "W": 129, "Cout": 128})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv2d_strided_7x7_fp32", op_type="conv", family="conv",
        description="Conv2d 7x7, stride 2, padding 3 (the ResNet stem on RGB images).",
        axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "var",
              "Ho": "(H - 1) // 2 + 1", "Wo": "(W - 1) // 2 + 1"},
        inputs={"x": (["N", "Cin", "H", "W"], F32), "w": (["Cout", "Cin", 7, 7], F32)},
        outputs={"y": (["N", "Cout", "Ho", "Wo"], F32)},
        run=conv2d_run.format(stride=2, padding=3, dilation=1, groups=1),
        make=conv2d_make("1", 7),
        workloads=[cpu({"N": 2, "Cin": 3, "H": 32, "W": 32, "Cout": 8}),
                   gpu({"N": 64, "Cin": 3, "H": 224, "W": 224, "Cout": 64}),
                   gpu({"N": 16, "Cin": 3, "H": 512, "W": 512, "Cout": 64}),
                   gpu({"N": 128, "Cin": 3, "H": 224, "W": 224, "Cout": 64})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv3d_3x3x3_fp32", op_type="conv", family="conv",
        description="Conv3d 3x3x3, stride 1, padding 1, no bias (3-D U-Net / video shapes).",
        axes={"N": "var", "Cin": "var", "D": "var", "H": "var", "W": "var", "Cout": "var"},
        inputs={"x": (["N", "Cin", "D", "H", "W"], F32), "w": (["Cout", "Cin", 3, 3, 3], F32)},
        outputs={"y": (["N", "Cout", "D", "H", "W"], F32)},
        run="""
        @torch.no_grad()
        def run(x, w):
            return F.conv3d(x, w, stride=1, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            n, ci, d, h, w_, co = (axes[k] for k in ("N", "Cin", "D", "H", "W", "Cout"))
            x = torch.randn(n, ci, d, h, w_, device=device)
            w = torch.randn(co, ci, 3, 3, 3, device=device) / (ci * 27) ** 0.5
            return {"x": x, "w": w}
        """,
        workloads=[cpu({"N": 1, "Cin": 4, "D": 6, "H": 8, "W": 8, "Cout": 8}),
                   gpu({"N": 2, "Cin": 32, "D": 32, "H": 64, "W": 64, "Cout": 32}),
                   gpu({"N": 4, "Cin": 64, "D": 16, "H": 32, "W": 32, "Cout": 64}),
                   gpu({"N": 1, "Cin": 128, "D": 16, "H": 32, "W": 32, "Cout": 128})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv1d_fp32", op_type="conv", family="conv",
        description="Conv1d kernel 3, padding 1 over [N, C, L] (audio / sequence models).",
        axes={"N": "var", "Cin": "var", "L": "var", "Cout": "var"},
        inputs={"x": (["N", "Cin", "L"], F32), "w": (["Cout", "Cin", 3], F32)},
        outputs={"y": (["N", "Cout", "L"], F32)},
        run="""
        @torch.no_grad()
        def run(x, w):
            return F.conv1d(x, w, stride=1, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            n, ci, l, co = axes["N"], axes["Cin"], axes["L"], axes["Cout"]
            x = torch.randn(n, ci, l, device=device)
            w = torch.randn(co, ci, 3, device=device) / (ci * 3) ** 0.5
            return {"x": x, "w": w}
        """,
        workloads=[cpu({"N": 2, "Cin": 8, "L": 64, "Cout": 8}),
                   gpu({"N": 16, "Cin": 512, "L": 4096, "Cout": 512}),
                   gpu({"N": 8, "Cin": 80, "L": 3000, "Cout": 384}),
                   gpu({"N": 32, "Cin": 256, "L": 1024, "Cout": 256})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv_transpose2d_fp32", op_type="conv", family="conv",
        description="ConvTranspose2d kernel 4, stride 2, padding 1 (x2 upsampling, "
                    "DCGAN / decoder shapes). Weight is [Cin, Cout, 4, 4].",
        axes={"N": "var", "Cin": "var", "H": "var", "W": "var", "Cout": "var",
              "Ho": "2 * H", "Wo": "2 * W"},
        inputs={"x": (["N", "Cin", "H", "W"], F32), "w": (["Cin", "Cout", 4, 4], F32)},
        outputs={"y": (["N", "Cout", "Ho", "Wo"], F32)},
        run="""
        @torch.no_grad()
        def run(x, w):
            return F.conv_transpose2d(x, w, stride=2, padding=1)
        """,
        make="""
        def make_inputs(axes, device):
            n, ci, h, w_, co = axes["N"], axes["Cin"], axes["H"], axes["W"], axes["Cout"]
            x = torch.randn(n, ci, h, w_, device=device)
            # each output pixel receives Cin * 2 * 2 products at stride 2
            w = torch.randn(ci, co, 4, 4, device=device) / (ci * 4) ** 0.5
            return {"x": x, "w": w}
        """,
        workloads=[cpu({"N": 2, "Cin": 8, "H": 8, "W": 8, "Cout": 4}),
                   gpu({"N": 16, "Cin": 256, "H": 32, "W": 32, "Cout": 128}),
                   gpu({"N": 8, "Cin": 512, "H": 16, "W": 16, "Cout": 256}),
                   gpu({"N": 32, "Cin": 128, "H": 64, "W": 64, "Cout": 64})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )
    add(
        name="conv_transpose3d_fp32", op_type="conv", family="conv",
        description="ConvTranspose3d kernel 2, stride 2 (3-D U-Net upsampling). Weight is "
                    "[Cin, Cout, 2, 2, 2].",
        axes={"N": "var", "Cin": "var", "D": "var", "H": "var", "W": "var", "Cout": "var",
              "Do": "2 * D", "Ho": "2 * H", "Wo": "2 * W"},
        inputs={"x": (["N", "Cin", "D", "H", "W"], F32), "w": (["Cin", "Cout", 2, 2, 2], F32)},
        outputs={"y": (["N", "Cout", "Do", "Ho", "Wo"], F32)},
        run="""
        @torch.no_grad()
        def run(x, w):
            return F.conv_transpose3d(x, w, stride=2)
        """,
        make="""
        def make_inputs(axes, device):
            n, ci, d, h, w_, co = (axes[k] for k in ("N", "Cin", "D", "H", "W", "Cout"))
            x = torch.randn(n, ci, d, h, w_, device=device)
            w = torch.randn(ci, co, 2, 2, 2, device=device) / ci ** 0.5
            return {"x": x, "w": w}
        """,
        workloads=[cpu({"N": 1, "Cin": 4, "D": 4, "H": 4, "W": 4, "Cout": 4}),
                   gpu({"N": 2, "Cin": 128, "D": 16, "H": 32, "W": 32, "Cout": 64}),
                   gpu({"N": 4, "Cin": 256, "D": 8, "H": 16, "W": 16, "Cout": 128}),
                   gpu({"N": 1, "Cin": 64, "D": 32, "H": 64, "W": 64, "Cout": 32})],
        tol=TOL_CONV_F32, allow_tf32=True,
    )


# =========================================================================================
# Scans
# =========================================================================================
SCAN_SIZES = [(4, 256), (128, 32768), (4096, 4096), (65536, 128)]


def _scans() -> None:
    randn_make = """
        def make_inputs(axes, device):
            return {"x": torch.randn(axes["B"], axes["L"], device=device)}
    """
    scan_tol = {"max_atol": 1e-3, "max_rtol": 1e-4}
    for op, body, desc in (
        ("cumsum", "return torch.cumsum(x, dim=1)", "Inclusive prefix sum along dim 1"),
        ("cumsum_reverse", "return torch.flip(torch.cumsum(torch.flip(x, [1]), dim=1), [1])",
         "Reverse (suffix) inclusive prefix sum along dim 1"),
        ("cumsum_exclusive", "return F.pad(torch.cumsum(x[:, :-1], dim=1), (1, 0))",
         "Exclusive prefix sum along dim 1 (y[:, 0] = 0, y[:, i] = sum of x[:, :i])"),
    ):
        add(
            name=f"{op}_fp32", op_type="scan", family="scan",
            description=desc + " of [B, L]; atol 1e-3 covers fp32 rounding of partial sums "
                               "that grow to ~sqrt(L).",
            axes={"B": "var", "L": "var"},
            inputs={"x": (["B", "L"], F32)},
            outputs={"y": (["B", "L"], F32)},
            run=f"""
            @torch.no_grad()
            def run(x):
                {body}
            """,
            make=randn_make,
            workloads=[cpu({"B": SCAN_SIZES[0][0], "L": SCAN_SIZES[0][1]})]
            + [gpu({"B": b, "L": l}) for b, l in SCAN_SIZES[1:]],
            tol=scan_tol,
        )
    add(
        name="cumsum_masked_fp32", op_type="scan", family="scan",
        description="Masked prefix sum along dim 1: cumsum(x * mask) with a boolean mask "
                    "(p = 0.5).",
        axes={"B": "var", "L": "var"},
        inputs={"x": (["B", "L"], F32), "mask": (["B", "L"], "bool")},
        outputs={"y": (["B", "L"], F32)},
        run="""
        @torch.no_grad()
        def run(x, mask):
            return torch.cumsum(x * mask, dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, l = axes["B"], axes["L"]
            x = torch.randn(b, l, device=device)
            mask = torch.rand(b, l, device=device) < 0.5
            return {"x": x, "mask": mask}
        """,
        workloads=[cpu({"B": SCAN_SIZES[0][0], "L": SCAN_SIZES[0][1]})]
        + [gpu({"B": b, "L": l}) for b, l in SCAN_SIZES[1:]],
        tol=scan_tol,
    )
    add(
        name="cumprod_fp32", op_type="scan", family="scan",
        description="Inclusive prefix product along dim 1. Inputs are +-(1 + 0.05 z) with a "
                    "random sign (1 in 8 negative), so prefix products wander over many "
                    "orders of magnitude without vanishing or overflowing, and change sign.",
        axes={"B": "var", "L": "var"},
        inputs={"x": (["B", "L"], F32)},
        outputs={"y": (["B", "L"], F32)},
        run="""
        @torch.no_grad()
        def run(x):
            return torch.cumprod(x, dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, l = axes["B"], axes["L"]
            mag = 1.0 + 0.05 * torch.randn(b, l, device=device)
            sign = torch.where(torch.rand(b, l, device=device) < 0.125, -1.0, 1.0)
            return {"x": mag * sign}
        """,
        workloads=[cpu({"B": 4, "L": 256}), gpu({"B": 1024, "L": 4096}),
                   gpu({"B": 16384, "L": 1024}), gpu({"B": 65536, "L": 128})],
        tol={"max_atol": 1e-6, "max_rtol": 1e-4},
    )


# =========================================================================================
# Losses (per-sample outputs)
# =========================================================================================
def _losses() -> None:
    ce_sizes = [(16, 1000), (4096, 4096), (1024, 32000), (256, 128256)]
    for dt in (F32, BF16):
        upcast = ".float()" if dt == BF16 else ""
        add(
            name=f"cross_entropy_{SHORT[dt]}", op_type="loss", family="loss", dtype=dt,
            description="Per-token cross-entropy (reduction='none') of logits [N, V] against "
                        "int64 class targets in [0, V)"
                        + ("; bf16 logits upcast to fp32 as LLM training code does" if dt == BF16
                           else "") + ". Logits are N(0, 3^2).",
            axes={"N": "var", "V": "var"},
            inputs={"logits": (["N", "V"], dt), "target": (["N"], "int64")},
            outputs={"loss": (["N"], F32)},
            run=f"""
            @torch.no_grad()
            def run(logits, target):
                return F.cross_entropy(logits{upcast}, target, reduction="none")
            """,
            make="""
            def make_inputs(axes, device):
                n, v = axes["N"], axes["V"]
                logits = torch.randn(n, v, device=device) * 3.0
                target = torch.randint(0, v, (n,), device=device, dtype=torch.int64)
                return {"logits": logits.to(@DT@), "target": target}
            """,
            workloads=[cpu({"N": ce_sizes[0][0], "V": ce_sizes[0][1]})]
            + [gpu({"N": n, "V": v}) for n, v in ce_sizes[1:]],
            tol={"max_atol": 1e-4, "max_rtol": 1e-4},
        )

    pair_sizes = [(64, 128), (4096, 4096), (65536, 256), (1024, 16384)]
    # per-sample noise scale s, log-uniform over [0.01, 10]: per-sample losses span ~6
    # decades and both Huber regimes
    pair_make = """
        def make_inputs(axes, device):
            b, d = axes["B"], axes["D"]
            s = torch.exp(torch.empty(b, 1, device=device).uniform_(-4.6, 2.3))
            pred = torch.randn(b, d, device=device)
            target = pred + s * torch.randn(b, d, device=device)
            return {"pred": pred, "target": target}
    """
    for op, expr, tol, desc in (
        ("mse_loss", 'F.mse_loss(pred, target, reduction="none").mean(dim=1)',
         {"max_atol": 1e-7, "max_rtol": 1e-4}, "Per-sample mean squared error"),
        ("huber_loss", 'F.huber_loss(pred, target, reduction="none", delta=1.0).mean(dim=1)',
         {"max_atol": 1e-7, "max_rtol": 1e-4}, "Per-sample Huber loss (delta 1)"),
    ):
        add(
            name=f"{op}_fp32", op_type="loss", family="loss",
            description=desc + " of pred and target [B, D], mean over D. Each sample has "
                               "its own error scale (log-uniform over [0.01, 10]).",
            axes={"B": "var", "D": "var"},
            inputs={"pred": (["B", "D"], F32), "target": (["B", "D"], F32)},
            outputs={"loss": (["B"], F32)},
            run=f"""
            @torch.no_grad()
            def run(pred, target):
                return {expr}
            """,
            make=pair_make,
            workloads=[cpu({"B": pair_sizes[0][0], "D": pair_sizes[0][1]})]
            + [gpu({"B": b, "D": d}) for b, d in pair_sizes[1:]],
            tol=tol,
        )
    add(
        name="kl_div_fp32", op_type="loss", family="loss",
        description="Per-sample KL(target || pred) = sum_v t (log t - log p) of probability "
                    "rows [B, V] (pred given as probabilities, logged inside, as KernelBench "
                    "does). Rows have their own temperatures, so KL spreads over ~0.01..10.",
        axes={"B": "var", "V": "var"},
        inputs={"pred": (["B", "V"], F32), "target": (["B", "V"], F32)},
        outputs={"loss": (["B"], F32)},
        run="""
        @torch.no_grad()
        def run(pred, target):
            return F.kl_div(torch.log(pred), target, reduction="none").sum(dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, v = axes["B"], axes["V"]
            tp = torch.exp(torch.empty(b, 1, device=device).uniform_(-2.3, 1.0))
            tt = torch.exp(torch.empty(b, 1, device=device).uniform_(-2.3, 1.0))
            pred = torch.softmax(torch.randn(b, v, device=device) * tp, dim=1)
            target = torch.softmax(torch.randn(b, v, device=device) * tt, dim=1)
            return {"pred": pred, "target": target}
        """,
        workloads=[cpu({"B": 16, "V": 100}), gpu({"B": 4096, "V": 4096}),
                   gpu({"B": 1024, "V": 32000}), gpu({"B": 65536, "V": 128})],
        tol={"max_atol": 1e-5, "max_rtol": 1e-4},
    )
    add(
        name="triplet_margin_loss_fp32", op_type="loss", family="loss",
        description="Per-triplet margin loss max(d(a, p) - d(a, n) + 1, 0) with Euclidean "
                    "distance (eps 1e-6, torch's pairwise_distance). Positives and negatives "
                    "are the anchor plus noise of per-sample scale, so about half the "
                    "triplets are active.",
        axes={"B": "var", "D": "var"},
        inputs={"anchor": (["B", "D"], F32), "positive": (["B", "D"], F32),
                "negative": (["B", "D"], F32)},
        outputs={"loss": (["B"], F32)},
        run="""
        @torch.no_grad()
        def run(anchor, positive, negative):
            return F.triplet_margin_loss(anchor, positive, negative, margin=1.0, reduction="none")
        """,
        make="""
        def make_inputs(axes, device):
            b, d = axes["B"], axes["D"]
            a = torch.randn(b, d, device=device)
            sp = torch.empty(b, 1, device=device).uniform_(0.2, 1.0) / d ** 0.5 * 4.0
            sn = torch.empty(b, 1, device=device).uniform_(0.2, 1.0) / d ** 0.5 * 4.0
            p = a + sp * torch.randn(b, d, device=device)
            n = a + sn * torch.randn(b, d, device=device)
            return {"anchor": a, "positive": p, "negative": n}
        """,
        workloads=[cpu({"B": 64, "D": 128}), gpu({"B": 65536, "D": 512}),
                   gpu({"B": 8192, "D": 4096}), gpu({"B": 262144, "D": 128})],
        tol={"max_atol": 1e-4, "max_rtol": 1e-4},
    )
    add(
        name="hinge_loss_fp32", op_type="loss", family="loss",
        description="Per-sample hinge loss mean_d max(1 - pred * target, 0) with targets "
                    "in {-1, +1}; predictions have a per-sample scale (log-uniform over "
                    "[0.1, 10]) so samples range from margin-satisfied to badly wrong.",
        axes={"B": "var", "D": "var"},
        inputs={"pred": (["B", "D"], F32), "target": (["B", "D"], F32)},
        outputs={"loss": (["B"], F32)},
        run="""
        @torch.no_grad()
        def run(pred, target):
            return torch.clamp(1.0 - pred * target, min=0.0).mean(dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, d = axes["B"], axes["D"]
            s = torch.exp(torch.empty(b, 1, device=device).uniform_(-2.3, 2.3))
            target = torch.where(torch.rand(b, d, device=device) < 0.5, -1.0, 1.0)
            bias = torch.empty(b, 1, device=device).uniform_(-1.0, 1.0)
            pred = (torch.randn(b, d, device=device) + 2.0 * bias * target) * s
            return {"pred": pred, "target": target}
        """,
        workloads=[cpu({"B": 64, "D": 128}), gpu({"B": 4096, "D": 4096}),
                   gpu({"B": 65536, "D": 256}), gpu({"B": 1024, "D": 16384})],
        tol={"max_atol": 1e-5, "max_rtol": 1e-4},
    )
    add(
        name="cosine_embedding_loss_fp32", op_type="loss", family="loss",
        description="Per-pair cosine distance 1 - cos(pred, target) over dim 1 (KernelBench's "
                    "cosine-similarity loss, per sample). Pairs have a per-sample correlation "
                    "uniform in (-1, 1), so the loss spans [0, 2].",
        axes={"B": "var", "D": "var"},
        inputs={"pred": (["B", "D"], F32), "target": (["B", "D"], F32)},
        outputs={"loss": (["B"], F32)},
        run="""
        @torch.no_grad()
        def run(pred, target):
            return 1.0 - F.cosine_similarity(pred, target, dim=1)
        """,
        make="""
        def make_inputs(axes, device):
            b, d = axes["B"], axes["D"]
            rho = torch.empty(b, 1, device=device).uniform_(-1.0, 1.0)
            pred = torch.randn(b, d, device=device)
            noise = torch.randn(b, d, device=device)
            s = torch.exp(torch.empty(b, 1, device=device).uniform_(-2.3, 2.3))
            target = (rho * pred + torch.sqrt(1.0 - rho * rho) * noise) * s
            return {"pred": pred, "target": target}
        """,
        workloads=[cpu({"B": 64, "D": 128}), gpu({"B": 4096, "D": 4096}),
                   gpu({"B": 65536, "D": 256}), gpu({"B": 1024, "D": 16384})],
        tol={"max_atol": 1e-5, "max_rtol": 1e-4},
    )


# =========================================================================================
# Writing
# =========================================================================================
def _axis_json(v) -> dict:
    if v == "var":
        return {"type": "var"}
    if isinstance(v, int):
        return {"type": "const", "value": v}
    return {"type": "expr", "expression": v}


def reference_source(spec: Spec) -> str:
    dt = TORCH_DT.get(spec.dtype, "torch.float32")
    body = dedent(spec.run) + "\n\n" + dedent(spec.make)
    return HEADER + body.replace("@DT@", dt)


def definition_json(spec: Spec) -> dict:
    d = {
        "name": spec.name,
        "op_type": spec.op_type,
        "description": spec.description,
        "tags": ["suite:l1", f"family:{spec.family}", f"dtype:{spec.dtype}"],
        "axes": {k: _axis_json(v) for k, v in spec.axes.items()},
        "inputs": {k: {"shape": list(s), "dtype": dt} for k, (s, dt) in spec.inputs.items()},
        "outputs": {k: {"shape": list(s), "dtype": dt} for k, (s, dt) in spec.outputs.items()},
        "reference": reference_source(spec),
        "custom_inputs_entrypoint": "make_inputs",
    }
    if spec.constraints:
        d["constraints"] = list(spec.constraints)
    if spec.allow_tf32 is not None:
        d["allow_tf32"] = spec.allow_tf32
    return d


def workload_lines(spec: Spec) -> list[dict]:
    out = []
    for axes, tags in spec.workloads:
        key = json.dumps(axes, sort_keys=True)
        tol = spec.tol(axes) if callable(spec.tol) else dict(spec.tol)
        tol = {"max_atol": tol["max_atol"], "max_rtol": tol["max_rtol"],
               "required_matched_ratio": tol.get("required_matched_ratio", 0.99)}
        w = {
            "uuid": str(uuid.uuid5(UUID_NAMESPACE, f"l1/{spec.name}/{key}")),
            "axes": dict(axes),
            "inputs": {k: {"type": "custom"} for k in spec.inputs},
            "tolerance": tol,
        }
        if tags:
            w["tags"] = list(tags)
        out.append(w)
    return out


def all_specs() -> list[Spec]:
    """The l1 problem list, in suite order (builds it on first call)."""
    if not SPECS:
        for part in (_gemm, _activations, _norms, _pooling, _reductions, _convs, _scans,
                     _losses):
            part()
        names = [s.name for s in SPECS]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate l1 problem names: {sorted(dup)}")
    return SPECS


def write(out_dir: Path = DATA_DIR) -> list[Path]:
    """Rewrite ``out_dir`` (removing problems no longer in the list). Returns problem dirs."""
    specs = all_specs()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    paths = []
    for spec in specs:
        d = out_dir / spec.name
        d.mkdir()
        (d / "definition.json").write_text(json.dumps(definition_json(spec), indent=2) + "\n")
        lines = [json.dumps(w) for w in workload_lines(spec)]
        (d / "workload.jsonl").write_text("\n".join(lines) + "\n")
        paths.append(d)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    ap.add_argument("--check", action="store_true",
                    help="screen the cpu-tagged workloads after writing")
    ap.add_argument("--check-all", action="store_true",
                    help="screen every workload (GPU-sized ones too; slow on CPU)")
    ap.add_argument("--only", default=None, help="with --check: fnmatch pattern of problems")
    args = ap.parse_args(argv)
    paths = write(args.out)
    print(f"wrote {len(paths)} problems to {args.out}")
    if args.check or args.check_all:
        from .check import check_problem_dir

        import fnmatch

        bad = 0
        for p in paths:
            if args.only and not fnmatch.fnmatch(p.name, args.only):
                continue
            for r in check_problem_dir(p, cpu_only=not args.check_all):
                flag = "ok " if r.ok else "BAD"
                bad += not r.ok
                print(f"{flag} {p.name:32s} {r.summary()}", flush=True)
        print(f"{bad} problem workload(s) failed the design check")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
