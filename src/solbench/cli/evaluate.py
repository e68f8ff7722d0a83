"""``solbench eval``: evaluate one candidate on one problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..config import DEFAULTS
from . import options as opt
from .common import (EvalProgress, check_device, check_device_name, check_file, check_hardware, check_output,
                     check_sol_model, choose_workloads, clean_errors, console, parse_bytes,
                     resolve_problem_arg, trace_appender)


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
        workloads: opt.Workloads = None,
        limit: opt.Limit = None,
        max_bytes: opt.MaxBytes = None,
        device: opt.Device = None,
        as_json: bool = typer.Option(False, "--json", help="print the traces as a JSON list"),
        rounds: opt.Rounds = DEFAULTS.rounds,
        iters: opt.Iters = None,
        no_timing: opt.NoTiming = False,
        hardware: Optional[str] = typer.Option(None, "--hardware",
                                               help="SOL hardware spec id or spec.toml (default: from the GPU name; 'none' disables)"),
        sol_model: str = typer.Option("refined", "--sol-model", help="refined or solar"),
        seed: opt.Seed = None,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
        timeout: opt.Timeout = None,
        build_timeout: opt.BuildTimeout = None,
        keep_going: opt.KeepGoing = False,
        spare_workers: opt.SpareWorkers = None,
        server: Optional[str] = typer.Option(None, "--server",
                                             help="run it on a `solbench serve` at this URL "
                                                  "(http://127.0.0.1:8765): same traces and output"),
    ) -> None:
        """Evaluate a candidate: correctness over fresh inputs, cold-L2 timing, SOL score.
        Progress goes to stderr (a bar on a terminal, one line per finished workload
        otherwise). Exit 0 only when every workload PASSED."""
        # every argument is checked before anything is loaded or run
        check_sol_model(sol_model)
        settings = opt.eval_config(rounds=rounds, iters=iters, timing=not no_timing, seed=seed,
                                   timeout=timeout, build_timeout=build_timeout,
                                   keep_going=keep_going, spare_workers=spare_workers)
        mb = parse_bytes(max_bytes)
        check_output(output)
        check_file(solution, "--solution")
        path = resolve_problem_arg(problem)
        # a server's device is the server's to check (and its default when none is named);
        # this process then never imports torch or the harness: it only sends and prints
        from . import lifetime

        # the run's token before any worker exists: every process started from now on
        # carries it, and the parent-death watchdog ends them all if this process is
        # SIGKILLed (a candidate's daemon of an early worker too, where no sandbox's pid
        # namespace takes it)
        lifetime.arm_watchdog()
        early = None
        if not server:
            # the workers first: a worker's start (interpreter, torch, CUDA context, the first
            # CUPTI session: 2-4 s on an H100) then overlaps this process's own imports,
            # the problem's loading and its inputs. Only a named device is started before it
            # is checked here (a bad one: the workers are killed on the way out)
            early = _early_workers(settings, check_device_name(device))
            _early_counter(early, hardware, check_device_name(device),
                           lambda: _cached_counts_cover(path, workloads, limit, mb))
        try:
            # before the device's check, which imports torch: a typo fails in a second
            check_hardware(hardware)
            dev = check_device_name(device) if server else check_device(device)
            if not server and early is None:
                early = _early_workers(settings, dev)
            _eval_body(problem, path, solution, workloads, limit, mb, settings, dev, server, hardware, sol_model,
                       output, quiet, as_json, early)
        finally:
            if early is not None:
                early.close()
                from ..sol.isolated import discard_spare

                discard_spare()


def _early_workers(settings, dev: str | None):
    """A one-shot :class:`~solbench.harness.SparePool` of the workers one evaluation takes
    (the candidate's, and the eager reference's when it is timed), started now; None when the
    device is not known yet or the settings start each worker when needed
    (``--spare-workers 0``, the CPU's default)."""
    if dev is None:
        return None
    cfg = opt.on_device(settings, dev)
    if cfg.n_spare_workers() == 0:
        return None
    from ..harness import SparePool

    pool = SparePool(dev, 2 if cfg.timing and cfg.reference_timing else 1, refill=False)
    pool.fill()
    return pool


def _cached_counts_cover(path, workloads, limit, mb) -> bool:
    """Whether the default counts cache already holds the counts of every workload this
    evaluation selects (then nothing will be counted). Counts do not depend on the hardware,
    so this needs neither torch nor the device. False on any doubt (a selection error is the
    evaluation's to report)."""
    try:
        from ..run.sol_cache import counts_cache
        from ..spec import load_problem

        cache = counts_cache()
        if cache is None:
            return False
        prob = load_problem(path)
        chosen = choose_workloads(prob, workloads, limit, mb)
        return all(cache.get(prob, w) is not None for w in chosen)
    except Exception:  # noqa: BLE001
        return False


def _early_counter(early, hardware: str | None, dev: str | None, cached=lambda: False) -> None:
    """With workers started early, a SOL counting child too (its interpreter and torch's
    import, seconds, then overlap the parent's own start; a bound the counts cache lacks is
    then counted that much sooner, and the first verdict, which waits for its bound, waits
    less). Only where a bound will be counted: on CUDA (the hardware from the GPU's name) or
    with ``--hardware`` named, and not when ``cached()`` says the counts cache holds every
    count (a child started for nothing imports torch beside the parent's and the workers'
    own imports); not when SOL is off or counted in this process."""
    hw = (hardware or "").strip().lower()
    if early is None or hw == "none" or not (hw or (dev or "").startswith("cuda")):
        return
    from ..proc.registry import OWN
    from ..sol.isolated import counting_in_process, prestart

    if not counting_in_process() and not cached():
        try:
            prestart(registry=OWN)
        except OSError:
            pass  # the count spawns its own child when it needs one


def _eval_body(problem, path, solution, workloads, limit, mb, settings, dev, server, hardware, sol_model,
               output, quiet, as_json, early) -> None:
    """``solbench eval`` once its arguments and device are checked: load, evaluate (locally,
    taking ``early``'s workers, or on ``server``), print, and exit 0 only when every workload
    PASSED."""

    from ..report.tables import trace_table
    from ..spec import load_problem, load_solution, reference_solution
    from ..spec.trace import Status

    with clean_errors():
        prob = load_problem(path)
        sol = load_solution(solution, prob) if solution else reference_solution(prob)
        chosen = choose_workloads(prob, workloads, limit, mb)
        # no --device with --server: "cpu" stands for the server's own default device in
        # the settings sent as "the default" (request_from_config's server_device)
        cfg = opt.on_device(settings, dev or "cpu", workloads=[w.uuid for w in chosen])
        write = trace_appender(output)
        with EvalProgress(len(chosen), f"{prob.name} / {sol.name}", enabled=not quiet) as prog:
            def on_trace(t) -> None:
                write(t)
                prog.done(t)

            if server:
                from ..serve.client import evaluate_remote

                traces = evaluate_remote(server, prob, sol, cfg, hardware=hardware, sol_model=sol_model,
                                         on_trace=on_trace, on_stage=prog.stage,
                                         server_device=dev is None)
                dev = next((t.evaluation.device for t in traces if t.evaluation.device), dev or "the server's device")
            else:
                from ..run.session import evaluate_and_score

                traces = evaluate_and_score(prob, sol, cfg, hardware=hardware, sol_model=sol_model,
                                            on_trace=on_trace, on_stage=prog.stage, spares=early)
    if as_json:
        typer.echo(json.dumps([json.loads(t.to_json_line()) for t in traces], allow_nan=False))
    else:
        console.print(trace_table(traces, title=f"{prob.name}: {sol.name} on {dev}"))
        n_ok = sum(t.evaluation.status == Status.PASSED for t in traces)
        console.print(f"{n_ok}/{len(traces)} workloads PASSED"
                      + (f"; traces appended to {output}" if output else ""), highlight=False, markup=False)
    raise typer.Exit(0 if traces and all(t.evaluation.status == Status.PASSED for t in traces) else 1)

