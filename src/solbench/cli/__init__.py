"""Command-line interface (Typer + rich). A thin layer: each sub-module registers its
commands with :func:`register`; none holds evaluation logic of its own.

Command modules import only light modules at import time (heavy ones, torch above all, are
imported inside the commands), so ``--help``, ``--version`` and argument errors answer at
once. :func:`main` prints usage errors as one line and ends every process a command started
on SIGTERM/SIGHUP (see :mod:`solbench.cli.lifetime`).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Optional

from .. import bytecode

# before the heavy imports (typer here, torch in the commands): on a host whose torch has no
# bytecode, this process and its workers compile it once into solbench's cache, not each time
bytecode.enable()

import typer  # noqa: E402 - after the bytecode cache is in place

app = typer.Typer(
    name="solbench",
    help="Correctness, timing and speed-of-light analysis of GPU kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: command modules, in help order; each defines register(app)
COMMAND_MODULES = [
    "evaluate", "validate", "demo", "sol", "hardware", "calibrate", "audit",
    "suite", "dataset", "baseline", "profile", "project", "extract",
    "report", "results", "compare",  # results store and reports
    "study",  # generate, verify, export: the model study
    "selftest",
    "serve",  # the warm evaluation service (docs/serve.md)
]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"solbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Optional[bool] = typer.Option(None, "--version", "-V", callback=_version,
                                                 is_eager=True, help="print the version and exit")) -> None:
    """Correctness, timing and speed-of-light analysis of GPU kernels."""


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


def _click_exceptions():
    """The exceptions module of the click Typer uses (Typer 0.2x vendors its own copy)."""
    return sys.modules[typer.BadParameter.__module__]


def _tidy(cmd) -> None:
    """Help as a user reads it: flags show no value placeholder (Typer 0.2x prints
    ``<bool>`` for them, the help flag included) and docstring lines within a paragraph are
    joined (rich would keep their hard line breaks); and every help text is escaped for rich
    markup (``pip install 'solbench[ray]'`` would print as ``'solbench'``), so help strings are
    written as plain text."""
    import re

    from ..report.markup import escape_markup

    def plain(p) -> None:
        if getattr(p, "is_flag", False):
            p.metavar = ""
        if getattr(p, "help", None) and not getattr(p, "_solbench_escaped", False):
            p.help = escape_markup(p.help)
            p._solbench_escaped = True

    for p in getattr(cmd, "params", []):
        plain(p)
    get_help = cmd.get_help_option

    def get_help_option(ctx, _get=get_help):
        opt = _get(ctx)
        if opt is not None:
            plain(opt)
        return opt

    cmd.get_help_option = get_help_option
    if cmd.help and not getattr(cmd, "_solbench_escaped", False):
        cmd.help = escape_markup(re.sub(r"(?<!\n)\n(?!\n)\s*", " ", cmd.help.strip()))
        cmd._solbench_escaped = True
    if getattr(cmd, "short_help", None) and not getattr(cmd, "_solbench_short_escaped", False):
        cmd.short_help = escape_markup(cmd.short_help)
        cmd._solbench_short_escaped = True
    for sub in getattr(cmd, "commands", {}).values():
        _tidy(sub)


def command():
    """The click command of the app, with its help tidied (see :func:`_tidy`)."""
    cmd = typer.main.get_command(app)
    _tidy(cmd)
    return cmd


def _fill_bytecode() -> None:
    """Where solbench's bytecode cache is in use and the command imported torch, compile into
    it what the workers import and the parent never does (:func:`solbench.bytecode.fill`: at
    most a few seconds a process, said on stderr), so the next run's workers read it."""
    from . import lifetime

    if bytecode.active() is None or "torch" not in sys.modules or lifetime.interrupted():
        return
    r = bytecode.fill()
    if not r:
        return
    done = r["files"] - r["left"]
    if done or r["given_up"]:
        left = ""
        if r["given_up"]:
            left = (f"; {r['left']} could not be compiled or written there, not retried until those "
                    f"packages change (the workers compile them)")
        elif r["left"]:
            left = f"; {r['left']} left for the next run"
        print(f"solbench: compiled {done} modules the workers import (torch.compile, Triton) into the bytecode "
              f"cache {bytecode.active()} in {r['seconds']:.1f} s{left}", file=sys.stderr)


def main() -> None:
    """The ``solbench`` entry point: usage errors as one ``error:`` line (exit 2)."""
    from . import lifetime

    exc = _click_exceptions()
    lifetime.install()
    # Kineto (torch.profiler) prints its USDT/STAGE markers on stderr at every profiler start
    # and stop, in this process and in every worker; level 6 is above all of its levels
    # (VERBOSE 0 ... USDT 5). Read at the first profiler use; a user's own setting wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    cmd = command()
    try:
        rc = cmd.main(args=sys.argv[1:], prog_name="solbench", standalone_mode=False)
    except exc.ClickException as e:
        msg = e.format_message()
        if msg:  # NoArgsIsHelpError has printed the help already and says nothing more
            ctx = getattr(e, "ctx", None)
            hint = f" (see: {ctx.command_path} --help)" if isinstance(e, exc.UsageError) and ctx else ""
            print(f"error: {msg}{hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        lifetime.kill_all()
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    lifetime.kill_all()
    try:
        _fill_bytecode()
    except KeyboardInterrupt:  # compileall was stopped with the workers (lifetime); said below
        pass
    if lifetime.interrupted():  # a Ctrl-C a library swallowed: the command still ends as one
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
