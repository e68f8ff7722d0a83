"""The options every evaluating command shares, defined once: name, help text (its defaults
read from :class:`solbench.config.EvalConfig`), and the one function that turns them into an
EvalConfig with the model's bounds (:func:`eval_config`).

``solbench eval`` (and its ``--server`` client), ``solbench run``, ``run-dataset``,
``run-kernelbench`` and ``demo`` declare ``iters: Iters = None`` and so on; a bad value ends
as one line naming the option (``error: --iters: must be >= 1, got 0``, exit 2) before
anything is loaded.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from ..config import DEFAULTS, EvalConfig, explain
from .common import LIMIT_HELP, MAX_BYTES_HELP, WORKLOADS_HELP, fail

_CPU, _CUDA = EvalConfig(device="cpu"), EvalConfig(device="cuda")

Device = Annotated[Optional[str], typer.Option(
    "--device", help="cuda, cuda:N, cpu or auto (default: cuda when present)")]
Workloads = Annotated[Optional[str], typer.Option("--workloads", "-w", help=WORKLOADS_HELP)]
RunWorkloads = Annotated[Optional[str], typer.Option("--workloads", "-w",
                                                     help=WORKLOADS_HELP + " (per problem)")]
Limit = Annotated[Optional[int], typer.Option("--limit", "-n", help=LIMIT_HELP)]
RunLimit = Annotated[Optional[int], typer.Option("--limit", "-n", help=LIMIT_HELP + " per problem")]
MaxBytes = Annotated[Optional[str], typer.Option("--max-bytes", help=MAX_BYTES_HELP)]
Rounds = Annotated[int, typer.Option("--rounds", help="correctness rounds with fresh inputs, "
                                                      "per workload")]
Iters = Annotated[Optional[int], typer.Option(
    "--iters", help=f"timed iterations per workload, a fixed count (default: on CUDA "
                    f"{_CUDA.n_iters_min()}-{_CUDA.n_iters()} by the stopping rule of "
                    f"docs/throughput.md, on the CPU {_CPU.n_iters()})")]
NoTiming = Annotated[bool, typer.Option("--no-timing", help="correctness only")]
Seed = Annotated[Optional[str], typer.Option(
    "--seed", help="base seed of the inputs (int or 0x-hex) to reproduce a run, e.g. the same "
                   "verdicts on two executors (traces record only its fingerprint: keep it, and "
                   "make it unguessable); default a secret random seed per input set")]
Timeout = Annotated[Optional[float], typer.Option(
    "--timeout", help=f"seconds any one call may take, the first included (default: "
                      f"{DEFAULTS.first_call_timeout_s:g} s for the first call, which pays "
                      f"JIT/autotuning; later calls {DEFAULTS.call_timeout_factor:g}x the "
                      f"reference's time, at least {DEFAULTS.call_timeout_floor_s:g} s)")]
BuildTimeout = Annotated[Optional[float], typer.Option(
    "--build-timeout", help=f"seconds a solution's build may take (default "
                            f"{DEFAULTS.build_timeout_s:g})")]
KeepGoing = Annotated[bool, typer.Option(
    "--keep-going", help="after a TIMEOUT, still run the solution's other workloads (default: "
                         "recorded as not run)")]
SpareWorkers = Annotated[Optional[int], typer.Option(
    "--spare-workers", help=f"workers kept started ahead of need, stopped while anything is "
                            f"timed (default {_CUDA.n_spare_workers()} on CUDA, "
                            f"{_CPU.n_spare_workers()} on the CPU; 0: start each when needed)")]

#: the option that sets each EvalConfig field: an error names what the user typed
OPTION_OF = {"device": "--device", "workloads": "--workloads", "rounds": "--rounds",
             "iters": "--iters", "timing": "--no-timing", "seed": "--seed",
             "call_timeout_s": "--timeout", "first_call_timeout_s": "--timeout",
             "build_timeout_s": "--build-timeout", "keep_going": "--keep-going",
             "spare_workers": "--spare-workers"}


def parse_seed(seed: str | None) -> int | None:
    """``--seed``: decimal or 0x-hex (a bare hex string is accepted too). Exits with one line
    otherwise."""
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


def eval_config(*, rounds: int | None = None, iters: int | None = None, timing: bool = True,
                seed: str | None = None, timeout: float | None = None,
                build_timeout: float | None = None, keep_going: bool = False,
                spare_workers: int | None = None, **fields: Any) -> EvalConfig:
    """The EvalConfig the shared options give (None: the model's default; ``timeout`` sets
    the first call's limit and every later call's; ``fields``: other EvalConfig fields a
    command sets itself). The device is EvalConfig's default until :func:`on_device`. A value
    out of the model's bounds exits 2 with one line naming the option."""
    kw: dict[str, Any] = dict(rounds=rounds, iters=iters, timing=timing, seed=parse_seed(seed),
                              keep_going=keep_going, spare_workers=spare_workers,
                              build_timeout_s=build_timeout, **fields)
    if timeout is not None:
        kw.update(call_timeout_s=timeout, first_call_timeout_s=timeout)
    return _make(lambda: EvalConfig(**{k: v for k, v in kw.items() if v is not None}))


def on_device(cfg: EvalConfig, device: str, **fields: Any) -> EvalConfig:
    """``cfg`` on ``device`` (a checked one: :func:`solbench.cli.common.check_device`) with
    ``fields`` changed (the chosen workloads)."""
    return _make(lambda: dataclasses.replace(cfg, device=device, **fields))


def _make(build) -> EvalConfig:
    try:
        return build()
    except ValidationError as e:
        fail(explain(e, OPTION_OF))
