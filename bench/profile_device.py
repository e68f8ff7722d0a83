"""Profile every workload on the GPU: the addressable fraction per workload, the Llama scale
sweep, figures, trimmed real traces for the classification tests, and the DLRM-Bench
projection when DLRM-Bench results exist under bench/results/.

Usage (GPU):  PYTHONPATH=src python bench/profile_device.py --out $OUT/profile
       (CPU):  PYTHONPATH=src python bench/profile_device.py --out /tmp/prof --device cpu
               (tiny scale, one CPU thread: checks the script end to end)

Runs (each in its own try/except): the seven workloads (ten configs) in infer and train mode,
plus Llama decode, at --scale (full on CUDA). A deadline (--budget-s, default 250 s) skips what
is left, listed as SKIPPED. Writes at most 7 files under --out:

  profile_language.json, profile_vision.json, profile_recommendation.json
                          {"reports": [ProfileReport, ...]} per domain
  profile_summary.json    the table, failures, skips, environment, DLRM-Bench projection(s)
  profile_fixtures.json   trimmed real traces (top kernel groups per run: kernel name, aten
                          ops, phase, tags, us per step) for tests/profile/fixtures/
  profile_classes.png     time by kernel class per workload (stacked bars)
  profile_llama_sweep.png addressable fraction vs model size (Llama 135M / 1B / 8B shapes)
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: run order: the seven workloads first (so a deadline cuts the sweep extras, not them)
RUNS = [
    ("llama-1b", "infer"), ("llama-1b", "train"),
    ("bert-base", "infer"), ("bert-base", "train"),
    ("vit-b16", "infer"), ("vit-b16", "train"),
    ("resnet50", "infer"), ("resnet50", "train"),
    ("dit-block", "infer"), ("dit-block", "train"),
    ("dlrm-kaggle", "infer"), ("dlrm-kaggle", "train"),
    ("dlrm-v2", "infer"), ("dlrm-v2", "train"),
    ("dcnv2", "infer"), ("dcnv2", "train"),
    ("llama-135m", "infer"), ("llama-8b", "infer"),
    ("llama-135m", "train"), ("llama-8b", "train"),
    ("llama-135m", "decode"), ("llama-1b", "decode"), ("llama-8b", "decode"),
]


def _args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--scale", default=None, help="full on CUDA, tiny on CPU by default")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--budget-s", type=float, default=250.0)
    ap.add_argument("--steps", type=int, default=20, help="unprofiled wall steps (median)")
    ap.add_argument("--active", type=int, default=3, help="profiled steps (2 for Llama train)")
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results",
                    help="where to look for DLRM-Bench trace JSONL files")
    return ap.parse_args(argv)


def _dlrm_results(folder: Path) -> list[Path]:
    """JSONL files under ``folder`` whose traces name dlrm* definitions."""
    out = []
    if not folder.is_dir():
        return out
    for p in sorted(folder.rglob("*.jsonl")):
        try:
            with p.open() as f:
                first = f.readline()
            if '"definition": "dlrm' in first or '"definition":"dlrm' in first:
                out.append(p)
        except OSError:
            continue
    return out


def main(argv=None) -> int:
    a = _args(argv)
    import torch

    from solbench.profile import figures
    from solbench.profile.amdahl import load_results, project
    from solbench.profile.pipeline import fixture_rows, profile
    from solbench.profile.workloads import WORKLOADS

    t_start = time.time()
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    scale = a.scale or ("full" if device.startswith("cuda") else "tiny")
    threads = 1 if device == "cpu" else None
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    a.out.mkdir(parents=True, exist_ok=True)
    reports, failures, skipped, fixtures = [], [], [], []
    for name, mode in RUNS:
        if only and name not in only:
            continue
        if time.time() - t_start > a.budget_s:
            skipped.append(f"{name} {mode}")
            print(f"SKIPPED {name} {mode} (deadline)", flush=True)
            continue
        t0 = time.time()
        try:
            active = 2 if (name.startswith("llama") and mode == "train") else a.active
            r = profile(name, mode, scale, device, wall_steps=a.steps, active_steps=active, warmup=3,
                        threads=threads)
            d = r.model_dump(mode="json")
            d["run_s"] = round(time.time() - t0, 2)
            reports.append(d)
            rows = fixture_rows(d, 16)
            unknown = [g for g in d["kernel_table"] if g["cls"] == "unknown"][:5]
            rows += [x for x in fixture_rows({**d, "kernel_table": unknown}, 5) if x not in rows]
            fixtures.extend(rows)
            af = d["addressable_fraction"]
            print(f"{name:12s} {mode:6s} wall {d['wall_ms']:9.3f} ms busy {d['busy_ms']:9.3f} ms "
                  f"strict {af['strict_busy']:.3f}/{af['strict_wall']:.3f} loose {af['loose_busy']:.3f}/"
                  f"{af['loose_wall']:.3f} ({d['run_s']:.1f}s) {d['warnings'][:1]}", flush=True)
        except Exception as e:  # one failure must not lose the rest
            failures.append({"workload": name, "mode": mode, "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-3000:]})
            print(f"FAILED {name} {mode}: {type(e).__name__}: {e}", flush=True)
        finally:
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()

    # ---- files
    by_domain: dict[str, list] = {"language": [], "vision": [], "recommendation": []}
    for d in reports:
        by_domain[WORKLOADS[d["workload"]].domain].append(d)
    for dom, rs in by_domain.items():
        (a.out / f"profile_{dom}.json").write_text(json.dumps({"reports": rs}))
    (a.out / "profile_fixtures.json").write_text(json.dumps(
        {"device": reports[0]["device_name"] if reports else device, "torch": torch.__version__,
         "scale": scale, "rows": fixtures}, indent=0))
    fig_err = []
    try:
        if reports:
            figures.class_bars(reports, a.out / "profile_classes.png")
    except Exception as e:
        fig_err.append(f"class_bars: {type(e).__name__}: {e}")
    try:
        sweep = [d for d in reports if d["workload"].startswith("llama-")]
        if sweep:
            figures.sweep_figure(sweep, a.out / "profile_llama_sweep.png")
    except Exception as e:
        fig_err.append(f"sweep_figure: {type(e).__name__}: {e}")

    # ---- DLRM-Bench projection, if results exist
    projections = []
    for res in _dlrm_results(a.results):
        try:
            traces = load_results(res)
        except Exception as e:
            projections.append({"results": str(res), "error": f"{type(e).__name__}: {e}"})
            continue
        for d in reports:
            if d["workload"] in ("dlrm-kaggle", "dlrm-v2", "dcnv2"):
                try:
                    p = project(d, traces)
                    projections.append({"results": str(res.relative_to(ROOT)) if res.is_relative_to(ROOT) else str(res),
                                        **p})
                except Exception as e:
                    projections.append({"results": str(res), "workload": d["workload"],
                                        "error": f"{type(e).__name__}: {e}"})

    table = [{"workload": d["workload"], "mode": d["mode"], "scale": d["scale"],
              "parameters": d["config"].get("parameters"), "implementation": d["config"].get("implementation"),
              "wall_ms": d["wall_ms"], "busy_ms": d["busy_ms"], "busy_over_wall": d["busy_over_wall"],
              "launch_bound": d["launch_bound"], **d["addressable_fraction"],
              "gemm_wall": d["classes"]["gemm"]["share_wall"], "attention_wall": d["classes"]["attention"]["share_wall"],
              "convolution_wall": d["classes"]["convolution"]["share_wall"],
              "unknown_busy": d["classes"]["unknown"]["share_busy"], "warnings": d["warnings"]} for d in reports]
    summary = {"device": reports[0]["device_name"] if reports else device, "scale": scale,
               "environment": reports[0]["environment"] if reports else {"torch": torch.__version__},
               "table": table, "failures": failures, "skipped": skipped, "figure_errors": fig_err,
               "dlrm_bench_projections": projections, "elapsed_s": round(time.time() - t_start, 1)}
    (a.out / "profile_summary.json").write_text(json.dumps(summary, indent=1))

    # ---- table
    print(f"\n{'workload':12s} {'mode':6s} {'wall ms':>9s} {'busy%':>6s} {'LB':>3s} {'str/busy':>8s} "
          f"{'str/wall':>8s} {'loo/busy':>8s} {'loo/wall':>8s} {'gemm':>6s} {'attn':>6s} {'conv':>6s}")
    for t in table:
        print(f"{t['workload']:12s} {t['mode']:6s} {t['wall_ms']:9.3f} {t['busy_over_wall']:6.1%} "
              f"{'y' if t['launch_bound'] else 'n':>3s} {t['strict_busy']:8.1%} {t['strict_wall']:8.1%} "
              f"{t['loose_busy']:8.1%} {t['loose_wall']:8.1%} {t['gemm_wall']:6.1%} {t['attention_wall']:6.1%} "
              f"{t['convolution_wall']:6.1%}")
    for p in projections:
        if "error" in p:
            print("projection error:", p)
            continue
        am, st = p["amdahl_mapped"], p["study_simple"]
        print(f"DLRM-Bench on {p['profile']['workload']} {p['profile']['mode']} ({p['results']}): "
              f"amdahl_mapped saves {am['time_saved']:.2%} ({am['end_to_end_speedup']:.4f}x over "
              f"{am['share_wall_mapped']:.1%} of wall); study_simple {st['addressable_fraction']:.3f} x "
              (f"{st['win_rate']:.3f} x (1 - 1/{st['median_speedup']:.3f})" if st['median_speedup'] is not None
               else "0 won") + f" = {st['gain']:.2%}")
    print("\nMarkdown (docs/profiling.md):\n")
    print("| workload | mode | params | wall ms | busy/wall | strict busy | strict wall | loose busy | loose wall |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in table:
        print(f"| {t['workload']} | {t['mode']} | {(t['parameters'] or 0) / 1e6:,.1f}M | {t['wall_ms']:.2f} | "
              f"{t['busy_over_wall']:.0%}{' (launch-bound)' if t['launch_bound'] else ''} | {t['strict_busy']:.1%} | "
              f"{t['strict_wall']:.1%} | {t['loose_busy']:.1%} | {t['loose_wall']:.1%} |")
    print(f"failures {len(failures)}, skipped {len(skipped)}, elapsed {summary['elapsed_s']} s")
    for f in failures:
        print(f"FAILED {f['workload']} {f['mode']}: {f['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
