"""``solbench demo``: the main job on a built-in default."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present)"),
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="append traces (JSONL) here"),
        iters: Optional[int] = typer.Option(None, "--iters", help="timed iterations per workload"),
    ) -> None:
        """Evaluate bundled problems (l1 softmax and RMSNorm, DLRM-Bench embedding bag) with real
        candidates: the eager reference, torch.compile and Triton on CUDA; on CPU an honest
        rewrite and three hostile candidates (uniform output, replayed cache, patched timer)
        that must be caught. Prints a table and exits 0 when every verdict is as expected."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from ..demo.run import demo_jobs
        from ..harness import EvalConfig
        from ..pipeline import evaluate_and_score
        from ..report.tables import trace_table
        from ..spec.trace import Status
        from ..store import append_traces
        from .evaluate import default_device

        dev = device or default_device()
        with clean_errors():
            jobs = demo_jobs(dev)
        console.print(f"solbench demo on [bold]{dev}[/bold]: {len(jobs)} problem x candidate pairs")
        traces, verdicts = [], []
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True) as prog:
            task = prog.add_task("demo", total=len(jobs))
            for job in jobs:
                prog.update(task, description=f"{job.problem.name} / {job.solution.name}")
                cfg = EvalConfig(device=dev, workloads=job.workloads, iters=iters)
                ts = evaluate_and_score(job.problem, job.solution, cfg)
                traces += ts
                ok = all(t.evaluation.status == Status.PASSED for t in ts)
                verdicts.append((job, ok if job.expect == "PASSED" else not any(
                    t.evaluation.status == Status.PASSED for t in ts)))
                prog.advance(task)
        if output:
            append_traces(output, traces)
        console.print(trace_table(traces, title=f"solbench demo ({dev})"))
        bad = [j for j, ok in verdicts if not ok]
        for j, ok in verdicts:
            mark = "[green]as expected[/green]" if ok else "[red]UNEXPECTED[/red]"
            console.print(f"  {j.problem.name} / {j.solution.name}: expected {j.expect} -> {mark}")
        raise typer.Exit(1 if bad else 0)
