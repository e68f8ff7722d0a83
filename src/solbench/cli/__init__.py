"""Command-line interface (Typer + rich). A thin layer: each sub-module registers its
commands with :func:`register`; none holds evaluation logic of its own."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import typer

app = typer.Typer(
    name="solbench",
    help="Correctness, timing and speed-of-light analysis of GPU kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: command modules, in help order; each defines register(app)
COMMAND_MODULES = [
    "evaluate", "validate", "demo", "sol", "hardware", "calibrate", "audit",
    "suite", "baseline", "profile", "project",
]


def _load() -> None:
    for name in COMMAND_MODULES:
        modname = f"{__name__}.{name}"
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:  # not written yet; any other missing module is a real error
                continue
            raise
        mod.register(app)


_load()


def _stop(signum, _frame) -> None:
    """SIGTERM/SIGHUP: kill and reap every worker (sandboxed or not), then exit 128+signum;
    nothing of the run is left behind (traces already appended stay)."""
    from ..harness.process import shutdown_all

    shutdown_all()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(128 + signum)


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    app()
