"""Figures (matplotlib, Agg): time by kernel class per workload, and the addressable fraction
against model size for the Llama sweep. Inputs are ProfileReport dicts (``model_dump()`` or
the JSON ``solbench profile --json`` prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .classify import CLASSES

#: bar colours per class (+ the host/launch gap)
COLORS = {
    "gemm": "#4e79a7", "attention": "#59a14f", "convolution": "#76b7b2", "framework_native": "#e15759",
    "generated": "#f28e2b", "vendor_other": "#ff9da7", "communication": "#b07aa1", "copy_engine": "#9c755f",
    "unknown": "#bab0ac", "idle": "#eeeeee",
}
#: the study's range of addressable fractions across its seven workloads
STUDY_RANGE = (0.089, 0.582)


def _label(r: dict[str, Any]) -> str:
    return f"{r['workload']} {r['mode']}" + ("" if r.get("scale") == "full" else f" ({r.get('scale')})")


def class_bars(reports: Sequence[dict[str, Any]], path: str | Path, title: str | None = None) -> Path:
    """Horizontal stacked bars: each workload's wall-clock step split into kernel classes
    (shares of wall time) plus the part with no kernel running ("idle": host, launch gaps).
    Writes a PNG at ``path`` and returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports = list(reports)
    # constrained layout places the figure legend outside, below the axis label (a legend
    # anchored to the axes at a fixed offset overlapped the label on short figures)
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(reports) + 2.0), layout="constrained")
    ys = range(len(reports))
    left = [0.0] * len(reports)
    for cls in (*CLASSES, "idle"):
        vals = []
        for r in reports:
            if cls == "idle":
                vals.append(max(0.0, 1.0 - sum(r["classes"][c]["share_wall"] for c in CLASSES)))
            else:
                vals.append(r["classes"].get(cls, {}).get("share_wall", 0.0))
        if not any(v > 0 for v in vals):
            continue
        ax.barh(list(ys), vals, left=left, color=COLORS[cls], label=cls.replace("_", " "), edgecolor="white",
                linewidth=0.5)
        left = [a + b for a, b in zip(left, vals)]
    for y, r in zip(ys, reports):
        af = r["addressable_fraction"]
        ax.text(1.01, y, f"{af['strict_wall']:.0%} / {af['loose_wall']:.0%}", va="center", fontsize=8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([_label(r) for r in reports], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the wall-clock step (unprofiled median); right: addressable strict / loose")
    dev = reports[0].get("device_name", "") if reports else ""
    ax.set_title(title or f"Time by kernel class ({dev})", fontsize=10)
    fig.legend(loc="outside lower center", ncol=5, fontsize=8, frameon=False)
    path = Path(path)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def sweep_figure(reports: Sequence[dict[str, Any]], path: str | Path, title: str | None = None) -> Path:
    """Addressable fraction (strict and loose, over wall time) against parameter count, one
    line per mode, for the Llama sweep; the study's 8.9%-58.2% range shaded for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.axhspan(*STUDY_RANGE, color="#dddddd", alpha=0.5, label="study range (7 workloads)")
    modes = sorted({r["mode"] for r in reports}, key=lambda m: ("infer", "decode", "train").index(m)
                   if m in ("infer", "decode", "train") else 9)
    marks = {"infer": "o", "decode": "s", "train": "^"}
    palette = {"infer": "#4e79a7", "decode": "#59a14f", "train": "#e15759"}
    for m in modes:
        color = palette.get(m, "#888888")
        rs = sorted((r for r in reports if r["mode"] == m), key=lambda r: r["config"]["parameters"])
        x = [r["config"]["parameters"] for r in rs]
        name = "prefill" if m == "infer" else m
        ax.plot(x, [r["addressable_fraction"]["strict_wall"] for r in rs], marker=marks.get(m, "o"), color=color,
                label=f"{name} strict")
        ax.plot(x, [r["addressable_fraction"]["loose_wall"] for r in rs], marker=marks.get(m, "o"), linestyle="--",
                color=color, label=f"{name} loose", alpha=0.6)
        for r, xi in zip(rs, x):
            ax.annotate(r["workload"].replace("llama-", ""), (xi, r["addressable_fraction"]["strict_wall"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("parameters (as built)")
    ax.set_ylabel("addressable fraction of wall time")
    ax.set_title(title or "Llama scale sweep: addressable fraction vs model size", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
