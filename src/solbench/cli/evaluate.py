"""``solbench eval``: evaluate one candidate on one problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import (LIMIT_HELP, MAX_BYTES_HELP, WORKLOADS_HELP, EvalProgress, check_device,
                     check_file, check_hardware, check_output, check_sol_model, choose_workloads,
                     clean_errors, console, fail, parse_bytes, resolve_problem_arg, trace_appender)


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        problem: Path = typer.Argument(..., help="problem directory, KernelBench .py, or bundled "
                                                 "problem (l1/relu_fp32)"),
        solution: Optional[Path] = typer.Option(None, "--solution", "-s",
                                                help="solution.json or candidate .py (default: the reference itself)"),
        output: Optional[Path] = typer.Option(None, "-o", "--output",
                                              help="append traces (JSONL) here, each as its workload finishes"),
        workloads: Optional[str] = typer.Option(None, "--workloads", "-w", help=WORKLOADS_HELP),
        limit: Optional[int] = typer.Option(None, "--limit", "-n", help=LIMIT_HELP),
        max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help=MAX_BYTES_HELP),
        device: Optional[str] = typer.Option(None, "--device", help="cuda, cuda:N or cpu (default: cuda when present)"),
        as_json: bool = typer.Option(False, "--json", help="print the traces as a JSON list"),
        rounds: int = typer.Option(5, "--rounds", help="correctness rounds with fresh inputs"),
        iters: Optional[int] = typer.Option(None, "--iters", help="timed iterations, a fixed count (default: on CUDA 20-50 by the stopping rule of docs/throughput.md, on CPU 10)"),
        no_timing: bool = typer.Option(False, "--no-timing", help="correctness only"),
        hardware: Optional[str] = typer.Option(None, "--hardware",
                                               help="SOL hardware spec id or spec.toml (default: from the GPU name; 'none' disables)"),
        sol_model: str = typer.Option("refined", "--sol-model", help="refined or solar"),
        seed: Optional[str] = typer.Option(None, "--seed",
                                           help="base seed of the inputs (int or 0x-hex) to "
                                                "reproduce a run (traces record only its "
                                                "fingerprint: keep it, and make it unguessable); "
                                                "default a secret random seed per input set"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
        timeout: Optional[float] = typer.Option(None, "--timeout",
                                                help="seconds any one call may take, the first "
                                                     "included (default: 300 s for the first call, "
                                                     "which pays JIT/autotuning; later calls 50x the "
                                                     "reference's time, at least 10 s)"),
        build_timeout: Optional[float] = typer.Option(None, "--build-timeout",
                                                      help="seconds a solution's build may take "
                                                           "(default 600)"),
        keep_going: bool = typer.Option(False, "--keep-going",
                                        help="after a TIMEOUT, still run the solution's other "
                                             "workloads (default: recorded as not run)"),
        server: Optional[str] = typer.Option(None, "--server",
                                             help="run it on a `solbench serve` at this URL "
                                                  "(http://127.0.0.1:8765): same traces and output"),
    ) -> None:
        """Evaluate a candidate: correctness over fresh inputs, cold-L2 timing, SOL score.
        Progress goes to stderr (a bar on a terminal, one line per finished workload
        otherwise). Exit 0 only when every workload PASSED."""
        # every argument is checked before anything is loaded or run
        check_sol_model(sol_model)
        base_seed = _parse_seed(seed)
        mb = parse_bytes(max_bytes)
        if rounds < 1:
            fail(f"--rounds: must be >= 1, got {rounds}")
        if iters is not None and iters < 1:
            fail(f"--iters: must be >= 1, got {iters}")
        for name, v in (("--timeout", timeout), ("--build-timeout", build_timeout)):
            if v is not None and not v > 0:
                fail(f"{name}: must be a positive number of seconds, got {v}")
        check_output(output)
        check_file(solution, "--solution")
        path = resolve_problem_arg(problem)
        dev = check_device(device)
        check_hardware(hardware)

        from . import lifetime
        from ..harness import EvalConfig
        from ..run.session import evaluate_and_score
        from ..report.tables import trace_table
        from ..spec import load_problem, load_solution, reference_solution
        from ..spec.trace import Status

        with clean_errors():
            prob = load_problem(path)
            sol = load_solution(solution, prob) if solution else reference_solution(prob)
            chosen = choose_workloads(prob, workloads, limit, mb)
            cfg = EvalConfig(device=dev, rounds=rounds, iters=iters, timing=not no_timing,
                             seed=base_seed, workloads=[w.uuid for w in chosen], keep_going=keep_going)
            if timeout is not None:
                cfg.set_timeout(timeout)
            if build_timeout is not None:
                cfg.build_timeout_s = float(build_timeout)
            write = trace_appender(output)
            lifetime.arm_watchdog()
            with EvalProgress(len(chosen), f"{prob.name} / {sol.name}", enabled=not quiet) as prog:
                def on_trace(t) -> None:
                    write(t)
                    prog.done(t)

                if server:
                    from ..serve.client import evaluate_remote

                    traces = evaluate_remote(server, prob, sol, cfg, hardware=hardware, sol_model=sol_model,
                                             on_trace=on_trace, on_stage=prog.stage)
                else:
                    traces = evaluate_and_score(prob, sol, cfg, hardware=hardware, sol_model=sol_model,
                                                on_trace=on_trace, on_stage=prog.stage)
        if as_json:
            typer.echo(json.dumps([json.loads(t.to_json_line()) for t in traces], allow_nan=False))
        else:
            console.print(trace_table(traces, title=f"{prob.name}: {sol.name} on {dev}"))
            n_ok = sum(t.evaluation.status == Status.PASSED for t in traces)
            console.print(f"{n_ok}/{len(traces)} workloads PASSED"
                          + (f"; traces appended to {output}" if output else ""), highlight=False, markup=False)
        raise typer.Exit(0 if traces and all(t.evaluation.status == Status.PASSED for t in traces) else 1)


def _parse_seed(seed: str | None) -> int | None:
    """``--seed``: decimal or 0x-hex (a bare hex string is accepted too). Raises
    typer.BadParameter otherwise."""
    if seed is None:
        return None
    s = seed.strip().lower()
    try:
        return int(s, 16) if s.startswith("0x") else int(s)
    except ValueError:
        try:
            return int(s, 16)
        except ValueError:
            fail(f"--seed: {seed!r} is not an integer or hex seed")
