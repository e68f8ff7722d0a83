"""Command-line interface (Typer + rich). A thin layer: each sub-module registers its
commands with :func:`register`; none holds evaluation logic of its own."""

from __future__ import annotations

import importlib

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
    "report", "results", "compare",  # results store and reports (issue 16)
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


def main() -> None:
    app()
