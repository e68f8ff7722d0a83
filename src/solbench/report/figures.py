"""Report figures (matplotlib, Agg): each function draws one PNG from records rows and
returns the numbers it shows, so that tests and the HTML page quote the same values.

* speedup vs SOL distance (log-log, Pearson r of the logs) — SOL-ExecBench's argument that
  speedup over a software baseline says little about distance to the hardware bound;
* SOL score vs headroom reclaimed (Pearson r; S = 1/(2 - h) for h <= 1);
* fast_p against p per candidate (KernelBench);
* SOL score distribution per candidate;
* roofline per hardware: measured FLOP/s = FLOP / T_k against arithmetic intensity, under the
  DRAM and compute ceilings of the hardware spec (``solbench.sol.hwspec``).
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from .aggregate import Unit, fast_p_curve, score_vs_headroom, speedup_vs_distance
from .records import TraceRow

DPI = 80


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path) -> Path:
    """Save small: render, quantise to a 128-colour palette, optimise (PIL)."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    buf.seek(0)
    img = Image.open(buf).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, optimize=True)
    return path


def _colors(keys):
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {k: cmap(i % 10) for i, k in enumerate(sorted(keys))}


def fig_speedup_vs_distance(rows: Sequence[TraceRow], path: Path) -> dict:
    plt = _plt()
    xs, ys, r = speedup_vs_distance(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    by = defaultdict(lambda: ([], []))
    for row in rows:
        if row.status == "PASSED" and row.speedup and row.sol_distance:
            by[row.label][0].append(row.sol_distance)
            by[row.label][1].append(row.speedup)
    col = _colors(by)
    for lab, (d, s) in sorted(by.items()):
        ax.scatter(d, s, s=14, alpha=0.7, color=col[lab], label=f"{lab} ({len(d)})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("SOL distance T_k / T_SOL (log)")
    ax.set_ylabel("speedup over reference T_ref / T_k (log)")
    ax.set_title(f"speedup vs SOL distance: Pearson r (log-log) = {_f(r)}, n = {len(xs)}")
    if by:
        ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, which="both", alpha=0.2)
    save_png(fig, path)
    return {"pearson_r_log": r, "n": len(xs)}


def fig_score_vs_headroom(rows: Sequence[TraceRow], path: Path) -> dict:
    plt = _plt()
    xs, ys, r = score_vs_headroom(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.scatter(xs, ys, s=14, alpha=0.6, color="tab:blue")
    if xs:
        lo = min(min(xs), 0.0)
        grid = [lo + (1.0 - lo) * i / 100 for i in range(101)]
        ax.plot(grid, [1 / (2 - h) for h in grid], color="tab:red", lw=1, label="S = 1/(2 - h)")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_xlabel("headroom reclaimed h = (T_b - T_k) / (T_b - T_SOL)")
    ax.set_ylabel("SOL score S")
    ax.set_title(f"SOL score vs headroom reclaimed: Pearson r = {_f(r)}, n = {len(xs)}")
    ax.grid(True, alpha=0.2)
    save_png(fig, path)
    return {"pearson_r": r, "n": len(xs)}


def fig_fast_p(us: Sequence[Unit], path: Path, title: str = "") -> dict:
    plt = _plt()
    by = defaultdict(list)
    for u in us:
        by[u.label].append(u)
    top = max([u.speedup for u in us if u.speedup] + [2.0])
    pmax = min(max(2.0, top * 1.05), 100.0)
    pmin = 0.25
    ps = [pmin * (pmax / pmin) ** (i / 200) for i in range(201)]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    col = _colors(by)
    out = {}
    for lab, uu in sorted(by.items()):
        ys = fast_p_curve(uu, ps)
        ax.plot(ps, ys, color=col[lab], lw=1.5, label=f"{lab} ({len(uu)} problems)")
        out[lab] = {f"{p:g}": v for p, v in zip((0.0, 1.0, 1.5, 2.0), fast_p_curve(uu, (0.0, 1.0, 1.5, 2.0)))}
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("speedup threshold p (log)")
    ax.set_ylabel("fast_p (share of problems correct and > p x faster)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title or "fast_p against p")
    if by:
        ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, alpha=0.2)
    save_png(fig, path)
    return out


def fig_score_distribution(us: Sequence[Unit], path: Path, title: str = "") -> dict:
    plt = _plt()
    by = defaultdict(list)
    for u in us:
        if u.sol_score is not None:
            by[u.label].append(u.sol_score)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    col = _colors(by)
    bins = [i / 20 for i in range(21)]
    labs = sorted(by)
    if labs:
        ax.hist([by[k] for k in labs], bins=bins, label=[f"{k} (n={len(by[k])})" for k in labs],
                color=[col[k] for k in labs])
        ax.legend(fontsize=8, loc="upper right")
    ax.axvline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("SOL score per problem (0 = incorrect or hack, 0.5 = reference, 1 = SOL)")
    ax.set_ylabel("problems")
    ax.set_title(title or "SOL score distribution")
    save_png(fig, path)
    return {k: {"n": len(v), "mean": sum(v) / len(v)} for k, v in by.items()}


def _ceilings(hardware: str):
    from ..sol.hwspec import hardware_for_device_name, load_hardware

    for name in (hardware, hardware_for_device_name(hardware) or ""):
        if not name:
            continue
        try:
            return load_hardware(name)
        except Exception:  # noqa: BLE001 - an unknown hardware name draws no ceilings
            continue
    return None


def fig_roofline(rows: Sequence[TraceRow], path: Path) -> dict:
    """One panel per hardware. Points: PASSED traces with FLOP > 0 and a bytes count."""
    plt = _plt()
    by_hw = defaultdict(list)
    for r in rows:
        if r.status == "PASSED" and r.latency_ms and r.total_flops and r.bytes_model:
            by_hw[r.sol_hardware or r.hardware].append(r)
    hws = sorted(by_hw) or ["(no points)"]
    fig, axes = plt.subplots(1, len(hws), figsize=(6.4 * len(hws), 4.6), squeeze=False)
    out = {}
    for ax, hw in zip(axes[0], hws):
        pts = by_hw.get(hw, [])
        spec = _ceilings(hw) if pts else None
        labs = {r.label for r in pts}
        col = _colors(labs)
        for lab in sorted(labs):
            rr = [r for r in pts if r.label == lab]
            ax.scatter([r.total_flops / r.bytes_model for r in rr],
                       [r.total_flops / (r.latency_ms * 1e-3) for r in rr],
                       s=12, alpha=0.7, color=col[lab], label=f"{lab} ({len(rr)})")
        ais = [r.total_flops / r.bytes_model for r in pts]
        if spec is not None and ais:
            bw = spec.peak.dram_bytes_per_s
            lo, hi = min(ais) / 2, max(ais) * 2
            xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
            peaks = [("CUDA fp32", spec.peak.cuda_flops_per_s.get("fp32"))]
            if spec.peak.tensor_flops_per_s:
                tf = spec.peak.tensor_flops_per_s
                k = "bf16" if "bf16" in tf else max(tf, key=tf.get)
                peaks.append((f"tensor {k}", tf[k]))
            for name, peak in peaks:
                if peak:
                    ax.plot(xs, [min(peak, bw * x) for x in xs], lw=1, ls="--",
                            label=f"roof: {bw / 1e12:.2g} TB/s, {name} {peak / 1e12:.3g} TFLOP/s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte, SOL model)")
        ax.set_ylabel("measured FLOP/s (FLOP / T_k)")
        ax.set_title(f"roofline: {hw} ({len(pts)} workloads)")
        if pts:
            ax.legend(fontsize=7, loc="upper left")
        ax.grid(True, which="both", alpha=0.2)
        out[hw] = {"points": len(pts), "spec": spec.id if spec else None}
    save_png(fig, path)
    return out


def _f(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"
