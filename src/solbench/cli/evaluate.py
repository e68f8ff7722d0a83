"""``solbench eval``: evaluate one candidate on one problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import clean_errors, console, is_tty


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        problem: Path = typer.Argument(..., help="problem directory or KernelBench .py"),
        solution: Optional[Path] = typer.Option(None, "--solution", "-s",
                                                help="solution.json or candidate .py (default: the reference itself)"),
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="append traces (JSONL) here"),
        workloads: Optional[str] = typer.Option(None, "--workloads", "-w",
                                                help="N (first N workloads) or comma-separated uuids/indices"),
        device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present)"),
        as_json: bool = typer.Option(False, "--json", help="print the traces as a JSON list"),
        rounds: int = typer.Option(5, "--rounds", help="correctness rounds with fresh inputs"),
        iters: Optional[int] = typer.Option(None, "--iters", help="timed iterations (default 50 CUDA, 10 CPU)"),
        no_timing: bool = typer.Option(False, "--no-timing", help="correctness only"),
        hardware: Optional[str] = typer.Option(None, "--hardware",
                                               help="SOL hardware spec id or spec.toml (default: from the GPU name; 'none' disables)"),
        sol_model: str = typer.Option("refined", "--sol-model", help="refined or solar"),
        seed: Optional[str] = typer.Option(None, "--seed",
                                           help="base seed of the inputs (int or 0x-hex, as in a "
                                                "trace's input_seed) to reproduce a run; default: "
                                                "each input set's seed drawn from OS randomness"),
        timeout: Optional[float] = typer.Option(None, "--timeout",
                                                help="seconds any one call may take, the first "
                                                     "included (default: 300 s for the first call, "
                                                     "which pays JIT/autotuning; later calls 50x the "
                                                     "reference's time, at least 10 s)"),
        build_timeout: Optional[float] = typer.Option(None, "--build-timeout",
                                                      help="seconds the build may take (default 600)"),
        keep_going: bool = typer.Option(False, "--keep-going",
                                        help="after a TIMEOUT, still run the other workloads "
                                             "(default: recorded as not run)"),
    ) -> None:
        """Evaluate a candidate: correctness over fresh inputs, cold-L2 timing, SOL score.
        Exit 0 only when every workload PASSED."""
        from ..harness import EvalConfig
        from ..pipeline import evaluate_and_score
        from ..report.tables import trace_table
        from ..spec import load_problem, load_solution, reference_solution
        from ..suites import resolve_problem
        from ..spec.trace import Status
        from ..store import append_traces

        with clean_errors():
            prob = load_problem(resolve_problem(problem))
            sol = load_solution(solution, prob) if solution else reference_solution(prob)
            dev = device or default_device()
            cfg = EvalConfig(device=dev, rounds=rounds, iters=iters, timing=not no_timing,
                             seed=_parse_seed(seed), keep_going=keep_going)
            for name, v in (("--timeout", timeout), ("--build-timeout", build_timeout)):
                if v is not None and not v > 0:
                    raise typer.BadParameter(f"{v} is not a positive number of seconds", param_hint=name)
            if timeout is not None:
                cfg.set_timeout(timeout)
            if build_timeout is not None:
                cfg.build_timeout_s = float(build_timeout)
            if workloads:
                if workloads.isdigit():
                    cfg.max_workloads = int(workloads)
                else:
                    cfg.workloads = [x.strip() for x in workloads.split(",") if x.strip()]
            from ..harness.evaluator import select_workloads

            n = len(select_workloads(prob, cfg))
            if is_tty() and not as_json:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

                prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console, transient=True)
                task = prog.add_task(f"{prob.name} / {sol.name}", total=n)
                cfg.progress = lambda uuid, j, total: prog.update(task, completed=j,
                                                                  description=f"{prob.name} / {sol.name} [{uuid[:8]}]")
                with prog:
                    traces = evaluate_and_score(prob, sol, cfg, hardware=hardware, sol_model=sol_model)
            else:
                traces = evaluate_and_score(prob, sol, cfg, hardware=hardware, sol_model=sol_model)
            if output:
                append_traces(output, traces)
        if as_json:
            typer.echo(json.dumps([json.loads(t.to_json_line()) for t in traces], allow_nan=False))
        else:
            console.print(trace_table(traces, title=f"{prob.name}: {sol.name} on {dev}"))
            n_ok = sum(t.evaluation.status == Status.PASSED for t in traces)
            console.print(f"{n_ok}/{len(traces)} workloads PASSED"
                          + (f"; traces appended to {output}" if output else ""))
        raise typer.Exit(0 if traces and all(t.evaluation.status == Status.PASSED for t in traces) else 1)


def _parse_seed(seed: str | None) -> int | None:
    """``--seed``: decimal or 0x-hex (a trace's ``input_seed`` is hex without the prefix, so a
    bare hex string is accepted too). Raises typer.BadParameter otherwise."""
    if seed is None:
        return None
    s = seed.strip().lower()
    try:
        return int(s, 16) if s.startswith("0x") else int(s)
    except ValueError:
        try:
            return int(s, 16)
        except ValueError:
            raise typer.BadParameter(f"{seed!r} is not an integer or hex seed", param_hint="--seed")
