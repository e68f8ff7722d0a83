"""``solbench demo``: the main job on a built-in default."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import EvalProgress, check_device, check_output, clean_errors, console, trace_appender


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
        from ..demo.run import demo_jobs
        from ..harness import EvalConfig
        from ..pipeline import evaluate_and_score
        from ..report.tables import trace_table
        from . import lifetime

        check_output(output)
        dev = check_device(device)
        with clean_errors():
            jobs = demo_jobs(dev)
        console.print(f"solbench demo on [bold]{dev}[/bold]: {len(jobs)} problem x candidate pairs")
        total = sum(len(j.workloads) if j.workloads else len(j.problem.workloads) for j in jobs)
        write = trace_appender(output)
        lifetime.arm_watchdog()
        traces, verdicts = [], []
        with EvalProgress(total, "demo") as prog:
            for job in jobs:
                label = f"{job.problem.name} / {job.solution.name}"

                def on_trace(t, label=label) -> None:
                    write(t)
                    prog.done(t, label)

                cfg = EvalConfig(device=dev, workloads=job.workloads, iters=iters)
                ts = evaluate_and_score(job.problem, job.solution, cfg, on_trace=on_trace)
                traces += ts
                got = [t.evaluation.status.value for t in ts]
                verdicts.append((job, job.as_expected(got), got))
        console.print(trace_table(traces, title=f"solbench demo ({dev})"))
        bad = [j for j, ok, _ in verdicts if not ok]
        for j, ok, got in verdicts:
            mark = "[green]as expected[/green]" if ok else "[red]UNEXPECTED[/red]"
            want = j.expect if j.expect == "PASSED" else f"caught ({' or '.join(j.caught_by)})"
            console.print(f"  {j.problem.name} / {j.solution.name}: expected {want}, got "
                          f"{', '.join(sorted(set(got))) or 'nothing'} -> {mark}", highlight=False)
        if output:
            console.print(f"traces appended to {output}", highlight=False)
        raise typer.Exit(1 if bad else 0)
