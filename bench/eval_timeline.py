"""Where a cold ``solbench eval`` spends its wall time, from the process's own start (issue 29
item 1): runs the command in this process with wall-clock stamps at its steps, taken as each
module is first imported (an import hook wraps the functions when their module loads, so the
import order and cost are the command's own), and prints them at exit, seconds since the
process started (from /proc/self/stat, so the interpreter's start counts).

    PYTHONPATH=$PWD/src python bench/eval_timeline.py PROBLEM [eval options...]

e.g. ``python bench/eval_timeline.py l1/relu_fp32 -w 0 --device cpu --spare-workers 2``.
Stamps (each the first time it happens): ``interpreter`` (this script's first line),
``early workers spawned``, ``counting child spawned``, ``device checked``, ``problem loaded``,
``evaluation started``, ``first verdict`` (the first trace's progress line), ``evaluation
done``, ``table printed``, ``workers closed``, ``exit``; and ``imports: torch`` etc. when a
module's import finishes. Writes nothing; the command's own output goes where it goes.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import os
import sys
import time

T_MONO = time.monotonic()
STAMPS: list[tuple[str, float]] = []


def _process_start() -> float:
    """This process's start on CLOCK_MONOTONIC's scale (boot-relative seconds)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def _boottime_now() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


T_START = _boottime_now() - _process_start()  # seconds since the process started, now
BASE = time.monotonic() - T_START


def stamp(name: str) -> None:
    if not any(n == name for n, _ in STAMPS):
        STAMPS.append((name, time.monotonic() - BASE))


def _wrap(obj, attr: str, before: str | None = None, after: str | None = None) -> None:
    fn = getattr(obj, attr)

    @functools.wraps(fn)
    def w(*a, **k):
        if before:
            stamp(before)
        try:
            return fn(*a, **k)
        finally:
            if after:
                stamp(after)

    setattr(obj, attr, w)


PATCHES = {
    "solbench.cli.evaluate": lambda m: (
        _wrap(m, "_early_workers", after="early workers spawned"),
        _wrap(m, "_early_counter", after="counting child spawned"),
        _wrap(m, "check_device", after="device checked"),
        _wrap(m, "_eval_body", after="evaluation done, table printed")),
    "solbench.spec": lambda m: _wrap(m, "load_problem", after="problem loaded"),
    "solbench.run.session": lambda m: _wrap(m, "evaluate_and_score", before="evaluation started",
                                            after="evaluation returned"),
    "solbench.cli.common": lambda m: _wrap(m.EvalProgress, "done", before="first verdict"),
    "solbench.harness.workers": lambda m: _wrap(m.SparePool, "close", after="workers closed"),
    "solbench.sol.isolated": lambda m: _wrap(m, "discard_spare", after="counting child ended"),
}
WATCH = ("torch", "solbench.harness", "solbench.spec", "solbench.sol", "typer", "rich", "pydantic")


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES and name not in WATCH:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        orig = loader.exec_module

        def exec_module(module, _orig=orig, _name=name):
            _orig(module)
            if _name in WATCH:
                stamp(f"imports: {_name}")
            if _name in PATCHES:
                PATCHES[_name](module)

        loader.exec_module = exec_module
        return spec


def _report() -> None:
    stamp("exit")
    print("\n| step | s since process start |\n|---|---|", file=sys.stderr)
    for n, t in sorted(STAMPS, key=lambda x: x[1]):
        print(f"| {n} | {t:.2f} |", file=sys.stderr)


def main() -> None:
    stamp("interpreter")
    sys.meta_path.insert(0, _Hook())
    atexit.register(_report)
    sys.argv = ["solbench", "eval", *sys.argv[1:]]
    from solbench.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
