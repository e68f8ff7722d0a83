"""SOL on the real GPU: calibrate, validity and tightness of the H200 bound.

    PYTHONPATH=src python bench/sol_device.py --out $OUT/sol_device      (GPU)
    PYTHONPATH=src python bench/sol_device.py --out /tmp/x --device cpu  (smoke test of the code path)

1. calibrate: copy / read / write bandwidth and GEMM per dtype (random data), written as a
   measured spec (sol_calibrated.toml) next to the raw figures.
2. validity: for >= 15 workloads (dev problems + plain ops: 2 GiB copy, bf16 GEMM 8192^3,
   softmax, layernorm) the eager reference and torch.compile are timed (CUDA events, L2
   flushed before each call, fastest and median of the samples) and compared with T_SOL from
   the H200 datasheet spec (model=refined, and solar for reference): no honest measurement may
   be faster than T_SOL. The attainable T_SOL from the calibrated spec is reported beside it.
3. tightness: T_SOL / measured for cuBLAS bf16 GEMM 8192^3 and the 2 GiB copy.

Writes sol_device.json, sol_calibrated.toml, sol_device.md (at most 3 files) under --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEV_CANDIDATES = [ROOT.parent / "shared" / "datasets" / "sol-execbench-dev",
                  ROOT / "shared" / "datasets" / "sol-execbench-dev"]

DEV_PROBLEMS = [
    "L1/069_rms_norm", "L1/013_fused_residual_rms_norm_backward", "L1/025_video_latent_gelu_activation",
    "L1/037_flux_feedforward_gelu_approximate", "L1/041_strided_conv2d_downsampling",
    "L1/045_fused_linear_gelu_grn_linear", "L1/049_attention_qk_matmul_with_gqa_repeat_and_scaling",
    "L1/077_whisper_decoder_output_projection", "L1/085_geglu_activation",
    "L1/081_joint_attention_context_projection", "FlashInfer-Bench/004_gemm_n128_k2048",
    "FlashInfer-Bench/008_gemm_n4096_k14336", "FlashInfer-Bench/024_rmsnorm_h2048",
    "L2/007_multimodal_rotary_embedding_attention", "L2/035_convnextv2_block_with_grn",
    "Quant/001_fp8_attention_output_projection", "L1/005_conv_gated_projection_with_causal_conv",
]

PLAIN = {
    # name: (inputs, outputs, reference, axes)
    "copy_2GiB_bf16": ({"x": {"shape": [1073741824], "dtype": "bfloat16"}},
                       {"y": {"shape": [1073741824], "dtype": "bfloat16"}},
                       "import torch\ndef run(x):\n    return x.clone()\n"),
    "gemm_bf16_8192": ({"a": {"shape": [8192, 8192], "dtype": "bfloat16"},
                        "b": {"shape": [8192, 8192], "dtype": "bfloat16"}},
                       {"c": {"shape": [8192, 8192], "dtype": "bfloat16"}},
                       "import torch\ndef run(a, b):\n    return a @ b\n"),
    "softmax_fp32_8192x8192": ({"x": {"shape": [8192, 8192], "dtype": "float32"}},
                               {"y": {"shape": [8192, 8192], "dtype": "float32"}},
                               "import torch\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"),
    "layernorm_bf16_16384x4096": ({"x": {"shape": [16384, 4096], "dtype": "bfloat16"},
                                   "w": {"shape": [4096], "dtype": "bfloat16"},
                                   "b": {"shape": [4096], "dtype": "bfloat16"}},
                                  {"y": {"shape": [16384, 4096], "dtype": "bfloat16"}},
                                  "import torch\nimport torch.nn.functional as F\n"
                                  "def run(x, w, b):\n    return F.layer_norm(x, (4096,), w, b, 1e-5)\n"),
}


def log(s: str) -> None:
    print(s, flush=True)


def plain_problem(tmp: Path, name: str, small: bool):
    from solbench.spec import load_problem

    ins, outs, ref = PLAIN[name]
    if small:  # cpu smoke test: same code, tiny shapes
        def shrink(d):
            return {k: {**v, "shape": [min(s, 64) for s in v["shape"]]} for k, v in d.items()}
        ins, outs = shrink(ins), shrink(outs)
        ref = ref.replace("(4096,)", "(64,)")
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "definition.json").write_text(json.dumps({"name": name, "axes": {}, "inputs": ins, "outputs": outs,
                                                   "reference": ref}))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": f"{name}-0", "axes": {},
                                                  "inputs": {k: {"type": "random"} for k in ins}}) + "\n")
    return load_problem(d)


def pick_workload(pdir: Path, problem, small: bool):
    """The workload with the largest official B200 sol_ms (longest, most stable to time);
    the smallest on the CPU."""
    try:
        meta = json.loads((pdir / "metadata.json").read_text())["sol"]["per_workload"]
        sol = [m["sol_ms"] for m in meta]
        i = (min if small else max)(range(len(sol)), key=lambda j: sol[j])
    except Exception:  # noqa: BLE001
        i = 0
    return problem.workloads[i]


def time_fn(fn, device: str, flush, budget_s: float = 1.5, max_iters: int = 30) -> dict:
    """Per-call times (ms): L2 flushed before each call, one CUDA event pair per call."""
    import torch

    for _ in range(2):
        fn()
    samples = []
    t_end = time.perf_counter() + budget_s
    if device == "cuda":
        torch.cuda.synchronize()
        while len(samples) < max_iters and (len(samples) < 5 or time.perf_counter() < t_end):
            flush()
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b))
    else:
        while len(samples) < 5 or (len(samples) < max_iters and time.perf_counter() < t_end):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return {"min_ms": min(samples), "median_ms": statistics.median(samples), "n": len(samples)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    small = device != "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    from solbench.sol import bound, count_workload, hardware_for_device_name, load_hardware, spec_to_toml
    from solbench.sol.bound import bound_from_counts

    res: dict = {"device": device, "torch": torch.__version__, "parts": {}}
    hw_id = "H200"
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        res["device_name"] = name
        hw_id = hardware_for_device_name(name) or "H200"
    res["hardware"] = hw_id
    hw = load_hardware(hw_id)

    # 1. calibrate ------------------------------------------------------------------------
    measured_spec = None
    if device == "cuda":
        try:
            from solbench.sol.calibrate import calibrate

            measured_spec, raw = calibrate(hw_id, log=log)
            (args.out / "sol_calibrated.toml").write_text(spec_to_toml(measured_spec))
            res["parts"]["calibrate"] = {"spec": measured_spec.model_dump(mode="json"), "raw": raw}
        except Exception:  # noqa: BLE001
            res["parts"]["calibrate"] = {"error": traceback.format_exc(limit=3)}
            log(res["parts"]["calibrate"]["error"])

    # 2. validity -------------------------------------------------------------------------
    rows = []
    flush_buf = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device) if device == "cuda" else None

    def flush():
        if flush_buf is not None:
            flush_buf.zero_()

    try:
        from solbench.inputs import make_inputs
        from solbench.spec import load_problem

        tmp = Path(tempfile.mkdtemp(prefix="sol_device_"))
        items = []
        for name in PLAIN:
            items.append((name, plain_problem(tmp, name, small), None))
        dev_root = next((d for d in DEV_CANDIDATES if d.exists()), None)
        if dev_root is not None:
            for rel in DEV_PROBLEMS:
                pdir = dev_root / rel
                if pdir.exists():
                    try:
                        items.append((rel, load_problem(pdir), pdir))
                    except Exception as e:  # noqa: BLE001
                        rows.append({"name": rel, "error": f"load: {e}"})
        if small:
            items = items[:4] + items[4:6]
        for name, problem, pdir in items:
            row: dict = {"name": name}
            try:
                w = problem.workloads[0] if pdir is None else pick_workload(pdir, problem, small)
                row["uuid"], row["axes"] = w.uuid, w.axes
                c = count_workload(problem, w)
                b = bound_from_counts(c, hw, "refined", allow_tf32=bool(problem.definition.allow_tf32))
                row["sol_ms"] = b.sol_ms
                row["bottleneck"] = b.bottleneck
                row["terms_ms"] = b.terms_ms
                row["sol_solar_model_ms"] = bound_from_counts(c, hw, "solar").sol_ms
                if measured_spec is not None:
                    row["sol_attainable_ms"] = bound_from_counts(
                        c, measured_spec, "refined", allow_tf32=bool(problem.definition.allow_tf32)).sol_ms
                inputs = make_inputs(problem, w, 0, device)
                ref = problem.make_reference(device)
                args_ = [inputs[k] for k in problem.definition.inputs]
                with torch.no_grad():
                    row["eager"] = time_fn(lambda: ref(*args_), device, flush)
                if not args.no_compile and time.time() - t_start < 150:
                    try:
                        cref = torch.compile(ref)
                        with torch.no_grad():
                            row["compile"] = time_fn(lambda: cref(*args_), device, flush)
                    except Exception as e:  # noqa: BLE001
                        row["compile"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                fastest = min(v["min_ms"] for k, v in row.items() if k in ("eager", "compile") and "min_ms" in v)
                row["fastest_over_sol"] = fastest / b.sol_ms
                row["valid"] = fastest >= b.sol_ms
                del inputs, args_
                if device == "cuda":
                    torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            log(f"{name:60s} sol {row.get('sol_ms', float('nan')):.4g} ms  eager "
                f"{row.get('eager', {}).get('min_ms', float('nan')):.4g}  compile "
                f"{row.get('compile', {}).get('min_ms', float('nan')):.4g}  {row.get('error', '')}")
    except Exception:  # noqa: BLE001
        res["parts"]["validity_error"] = traceback.format_exc(limit=3)
        log(res["parts"]["validity_error"])
    res["parts"]["validity"] = rows
    timed = [r for r in rows if "valid" in r]
    res["validity_summary"] = {"workloads_timed": len(timed), "violations": [r["name"] for r in timed if not r["valid"]],
                               "min_fastest_over_sol": min((r["fastest_over_sol"] for r in timed), default=None)}

    # 3. tightness ------------------------------------------------------------------------
    tight = {}
    for r in rows:
        if r["name"] in ("gemm_bf16_8192", "copy_2GiB_bf16") and "eager" in r:
            tight[r["name"]] = {"sol_ms": r["sol_ms"], "measured_min_ms": r["eager"]["min_ms"],
                                "fraction_of_sol": r["sol_ms"] / r["eager"]["min_ms"],
                                "fraction_of_sol_median": r["sol_ms"] / r["eager"]["median_ms"]}
    res["parts"]["tightness"] = tight
    res["elapsed_s"] = round(time.time() - t_start, 1)
    (args.out / "sol_device.json").write_text(json.dumps(res, indent=1, default=str))
    md = [f"# SOL on {res.get('device_name', device)} (spec {hw_id}, model refined)", "",
          "| workload | T_SOL ms | bound by | eager min ms | compile min ms | fastest / T_SOL | valid |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['name']} | error: {r['error'][:80]} | | | | | |")
            continue
        md.append(f"| {r['name']} | {r['sol_ms']:.4g} | {r['bottleneck']} | {r['eager']['min_ms']:.4g} | "
                  f"{r.get('compile', {}).get('min_ms', float('nan')):.4g} | {r['fastest_over_sol']:.2f} | "
                  f"{'yes' if r['valid'] else 'NO'} |")
    md += ["", "| tightness | T_SOL ms | measured ms | fraction of SOL |", "|---|---|---|---|"]
    for k, v in tight.items():
        md.append(f"| {k} | {v['sol_ms']:.4g} | {v['measured_min_ms']:.4g} | {v['fraction_of_sol']:.1%} |")
    (args.out / "sol_device.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"elapsed {res['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
