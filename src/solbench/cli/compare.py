"""`solbench compare A B`: per (problem, workload, candidate) faster / slower / same within
noise, with the statistic named (solbench.report.compare)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .common import clean_errors, console, fail

FORMATS = ("table", "json", "markdown")


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_cmd(
        a: Path = typer.Argument(..., help="baseline results JSONL (A)"),
        b: Path = typer.Argument(..., help="results JSONL to compare against A (B)"),
        alpha: float = typer.Option(0.01, "--alpha", help="significance level of the Mann-Whitney U test"),
        threshold: float = typer.Option(0.02, "--threshold", help="smallest relative change of the median "
                                        "reported as faster/slower when the test is significant"),
        noise: float = typer.Option(0.05, "--noise", help="noise threshold of the ratio of medians when a "
                                    "trace keeps no samples"),
        ignore_label: bool = typer.Option(False, "--ignore-label", help="pair by (problem, workload) only "
                                          "(each file must hold one candidate per workload)"),
        label_a: str = typer.Option(None, "--label-a", help="only this candidate label from A"),
        label_b: str = typer.Option(None, "--label-b", help="only this candidate label from B"),
        fmt: str = typer.Option("table", "--format", help=" | ".join(FORMATS)),
        include_unverified: bool = typer.Option(False, "--include-unverified", help="also use lines that fail authentication (marked)"),
        changed_only: bool = typer.Option(False, "--changed", help="list only pairs that are not 'same'"),
    ) -> None:
        """Compare two results files workload by workload."""
        from ..errors import SolbenchError
        from ..report.compare import compare, verdict_counts
        from ..report.records import load, why_no_accepted

        if fmt not in FORMATS:
            fail(f"--format: {fmt!r} not in {list(FORMATS)}")
        with clean_errors():
            ra = load([a], include_unverified=include_unverified)
            rb = load([b], include_unverified=include_unverified)
            for path, rs in ((a, ra), (b, rb)):
                if not rs.rows and why_no_accepted(rs):  # every line refused; an empty file compares
                    fail(f"no accepted traces in {path}" + why_no_accepted(rs))
            try:
                cs = compare(ra, rb, alpha=alpha, threshold=threshold, noise=noise, ignore_label=ignore_label,
                             label_a=label_a, label_b=label_b)
            except ValueError as e:
                raise SolbenchError(str(e)) from None
        counts = verdict_counts(cs)
        shown = [c for c in cs if c.verdict != "same"] if changed_only else cs
        if fmt == "json":
            print(json.dumps({"a": str(a), "b": str(b), "alpha": alpha, "threshold": threshold, "noise": noise,
                              "counts": counts, "comparisons": [c.to_json() for c in shown]}, allow_nan=False))
            return
        head = ["problem", "workload", "candidate", "A ms", "B ms", "B/A", "statistic", "p", "verdict"]

        def cells(c):
            return [c.definition, c.workload[:8], c.label, _f(c.median_a_ms), _f(c.median_b_ms),
                    _f(c.ratio, ".3f"), c.statistic, _f(c.p_value, ".2g"),
                    c.verdict if c.verdict != "status" else f"{c.status_a} -> {c.status_b}"]
        if fmt == "markdown":
            print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
            for c in shown:
                print("| " + " | ".join(cells(c)) + " |")
        else:
            from ..report.markup import TextTable as Table
            from ..report.markup import styled

            t = Table(title=f"B = {b} against A = {a} (medians in ms; B/A < 1: B faster)")
            for h in head:
                t.add_column(h, justify="right" if h in ("A ms", "B ms", "B/A", "p") else "left")
            style = {"faster": "green", "slower": "red", "status": "magenta", "unresolved in A": "yellow",
                     "unresolved in B": "yellow", "unresolved in A and B": "yellow"}
            for c in shown:
                row = cells(c)
                st = style.get(c.verdict)
                if st:
                    row[-1] = styled(row[-1], st)
                t.add_row(*row)
            console.print(t)
        print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
              f" (Mann-Whitney U two-sided at alpha {alpha} and |B/A - 1| > {threshold:g} with samples; "
              f"ratio of medians against noise {noise:g} without)")
        if any(c.statistic == "resolution" for c in cs):
            print("unresolved in A/B: that run recorded the candidate's CPU time as not above its noise "
                  "floor (docs/harness.md, Resolution of CPU times); no verdict, left out of the statistics")


def _f(v, spec=".4g") -> str:
    return "-" if v is None else format(v, spec)
