"""``solbench demo``: the main job on a built-in default."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import options as opt
from .common import escape_markup, EvalProgress, check_device, check_output, clean_errors, console, trace_appender

#: spare workers the CUDA demo keeps started ahead (each one is a process with torch, a CUDA
#: context and a warm profiler; stopped while anything is timed): the demo's 11 pairs need
#: 14 workers, each about 10 s to start on the H200 host (16 cores), and its first four pairs
#: take 6 of them within about 30 s (docs/throughput.md)
DEMO_CUDA_SPARES = 6


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        device: opt.Device = None,
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="append traces (JSONL) here"),
        iters: opt.Iters = None,
    ) -> None:
        """Evaluate bundled problems (l1 softmax and RMSNorm, DLRM-Bench embedding bag), one
        workload each, with real candidates: the eager references, an honest softmax rewrite
        and three hostile candidates (uniform output, replayed cache, patched timer) that must
        be caught; on CUDA also Triton kernels and a torch.compile baseline. Prints a table
        and exits 0 when every verdict is as expected."""
        from ..demo.run import demo_jobs
        from ..report.tables import trace_table
        from ..run.session import make_default_evaluator
        from . import lifetime

        settings = opt.eval_config(iters=iters)
        check_output(output)
        dev = check_device(device)
        lifetime.arm_watchdog()  # before any worker starts: each one carries its token
        # the suite runner's evaluator: a problem's reference worker kept between its
        # candidates, every pair's workers taken from spares started ahead (on CUDA: as many
        # as the first pairs take, started before the problems load; then, while they start,
        # this process works out the SOL bounds the table shows)
        shared = make_default_evaluator(opt.on_device(
            settings, dev, spare_workers=DEMO_CUDA_SPARES if dev.startswith("cuda") else None))
        try:
            shared.start_ahead(dev)
            with clean_errors():
                jobs = demo_jobs(dev)
            shared.start_ahead(dev, [(j.problem, j.workloads) for j in jobs if j.expect == "PASSED"])
        except BaseException:
            shared.close()
            raise
        console.print(f"solbench demo on [bold]{dev}[/bold]: {len(jobs)} problem x candidate pairs")
        total = sum(len(j.workloads) if j.workloads else len(j.problem.workloads) for j in jobs)
        write = trace_appender(output)
        traces, verdicts = [], []
        with EvalProgress(total, "demo") as prog:
            for job in jobs:
                label = f"{job.problem.name} / {job.solution.name}"

                def on_trace(t, label=label) -> None:
                    write(t)
                    prog.done(t, label)

                uuids = job.workloads or [w.uuid for w in job.problem.workloads]
                try:
                    ts = shared(job.problem, job.solution, dev, uuids, on_trace=on_trace)
                except BaseException:
                    shared.close()
                    raise
                traces += ts
                got = [t.evaluation.status.value for t in ts]
                verdicts.append((job, job.as_expected(got), got))
        shared.close()
        console.print(trace_table(traces, title=f"solbench demo ({dev})"))
        bad = [j for j, ok, _ in verdicts if not ok]
        for j, ok, got in verdicts:
            mark = "[green]as expected[/green]" if ok else "[red]UNEXPECTED[/red]"
            want = j.expect if j.expect == "PASSED" else f"caught ({' or '.join(j.caught_by)})"
            console.print(escape_markup(f"  {j.problem.name} / {j.solution.name}: expected {want}, got "
                                        f"{', '.join(sorted(set(got))) or 'nothing'} -> ") + mark, highlight=False)
        if output:
            console.print(f"traces appended to {output}", highlight=False, markup=False)
        raise typer.Exit(1 if bad else 0)
