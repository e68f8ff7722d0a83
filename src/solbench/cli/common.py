"""Shared CLI helpers: one console, clean error exits (never a traceback for bad input)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import typer
from rich.console import Console

from ..errors import SolbenchError

# a pipe or file gets wide tables (rich would otherwise assume 80 columns)
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


@contextmanager
def clean_errors(exit_code: int = 2):
    """Turn SolbenchError (bad input) into one red line and ``exit_code``."""
    try:
        yield
    except SolbenchError as e:
        err_console.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(exit_code) from None


def is_tty() -> bool:
    return sys.stdout.isatty()
