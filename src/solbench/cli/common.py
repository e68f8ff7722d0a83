"""Shared CLI helpers: one console, clean error exits (never a traceback for bad input),
argument checks that run before any work, the one meaning of workload selection, and
progress reporting for evaluations.

Everything here imports only light modules at import time (no torch), so an argument error
or ``--help`` answers in a fraction of a second; heavy imports happen inside the functions
that need them.
"""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import typer
from rich.console import Console

from ..config import DEVICE_PATTERN
from ..errors import SolbenchError
from ..report.markup import escape_markup, styled  # noqa: F401 - the CLI's one markup helper

if TYPE_CHECKING:  # pragma: no cover
    from ..spec import Problem, Trace, Workload

# a pipe or file gets wide tables (rich would otherwise assume 80 columns)
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

#: prefixes that say nothing to a user: pydantic's wrapper of a validator's ValueError, and
#: the "file" of an object that was never read from disk
_NOISE = (re.compile(r"Value error, "), re.compile(r"^<memory>: "), re.compile(r"(?<=: )<memory>: "))


def clean_message(text: str) -> str:
    """``text`` as one line: pydantic's "Value error, " and a ``<memory>:`` location (an
    object not read from a file) removed, newlines folded to "; "."""
    s = str(text)
    for rx in _NOISE:
        s = rx.sub("", s)
    return "; ".join(x.strip() for x in s.splitlines() if x.strip())


def fail(message: str, exit_code: int = 2):
    """Print ``error: message`` (one line, no markup interpretation) and exit."""
    err_console.print(f"error: {clean_message(message)}", highlight=False, soft_wrap=True,
                      markup=False)
    raise typer.Exit(exit_code)


@contextmanager
def clean_errors(exit_code: int = 2):
    """Turn bad input (SolbenchError, a pydantic ValidationError, an unreadable file) into one
    ``error:`` line and ``exit_code``."""
    try:
        yield
    except SolbenchError as e:
        fail(str(e), exit_code)
    except OSError as e:
        if e.filename is not None:
            fail(f"{e.filename}: {e.strerror or e}", exit_code)
        raise
    except Exception as e:  # noqa: BLE001 - only pydantic's ValidationError is bad input here
        if type(e).__name__ == "ValidationError" and type(e).__module__.startswith("pydantic"):
            errs = e.errors()  # type: ignore[attr-defined]
            first = errs[0] if errs else {"loc": (), "msg": str(e)}
            loc = ".".join(str(x) for x in first.get("loc", ()))
            fail(f"{loc}: {first.get('msg')}" if loc else str(first.get("msg")), exit_code)
        raise


def is_tty() -> bool:
    return sys.stdout.isatty()


# --- argument checks (before any work) ----------------------------------------------------
_DEVICE_RX = re.compile(DEVICE_PATTERN)  # the one EvalConfig and the service's requests take


def check_device_name(device: str | None) -> str | None:
    """``device`` when it names a device solbench runs on (``cpu``, ``cuda``, ``cuda:N``);
    None for None or "auto". Checks the name only, not this machine: for a device of
    another machine (``solbench eval --server``). Exits with one line for anything else."""
    if device is None or device == "auto":
        return None
    if not _DEVICE_RX.match(device):
        fail(f"--device: {device!r} is not supported (cpu, cuda or cuda:N)")
    return device


def check_device(device: str | None) -> str:
    """The device to run on: ``cpu``, ``cuda`` or ``cuda:N``; None or "auto" picks cuda when
    one is present. Exits with one line for anything else (``tpu``, ``mps``, a CUDA device
    this machine lacks)."""
    device = check_device_name(device)
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            fail(f"--device: {device!r}: no CUDA device on this machine")
        idx = int(device.split(":")[1]) if ":" in device else 0
        if idx >= torch.cuda.device_count():
            fail(f"--device: {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def check_sol_model(model: str, option: str = "--sol-model") -> str:
    if model not in ("refined", "solar"):
        fail(f"{option}: unknown model {model!r} (refined or solar)")
    return model


def check_hardware(hardware: str | None, option: str = "--hardware") -> str | None:
    """Load the hardware spec ``hardware`` names (id or spec.toml) now, so a typo fails in
    a second and not after the evaluation; None and "none" pass unchanged."""
    if hardware is None or hardware.lower() == "none":
        return hardware
    from ..sol import load_hardware

    try:
        load_hardware(hardware)
    except SolbenchError as e:
        fail(f"{option}: {e}")
    return hardware


def check_file(path: Path | None, option: str, *, dir_ok: bool = False) -> Path | None:
    """Exit naming ``option`` when ``path`` is given but does not exist."""
    if path is not None and not Path(path).exists():
        fail(f"{option}: {path}: no such file" + (" or directory" if dir_ok else ""))
    return path


def check_output(path: Path | None, option: str = "-o") -> Path | None:
    """An output file must be creatable: its folder may be made, but not be a file."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        fail(f"{option}: {p} is a directory (give a file name)")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                fail(f"{option}: {parent} is not a directory")
            break
    return p


def resolve_problem_arg(problem: Path | str) -> Path:
    """The problem path (a bundled suite name resolved), or one line and exit 2 when there is
    no such file: checked before torch is imported."""
    from ..suites import resolve_problem

    p = resolve_problem(problem)
    if not Path(p).exists():
        fail(f"{problem}: no such problem (expected a problem directory, a KernelBench .py, "
             "or a bundled suite problem such as l1/relu_fp32)")
    return p


_BYTES_RX = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)


def parse_bytes(text: str | None, option: str = "--max-bytes") -> int | None:
    """``1e9``, ``512M``, ``1G``/``1GiB`` (binary: K=2**10, M=2**20, G=2**30, T=2**40) or a
    plain byte count. Exits with one line when it is none of these or not positive."""
    if text is None:
        return None
    m = _BYTES_RX.match(str(text))
    if not m:
        fail(f"{option}: {text!r} is not a byte count (e.g. 1e9, 512M, 2G)")
    n = float(m.group(1)) * (1 << (10 * " kmgt".index(m.group(2).lower() or " ")))
    if n <= 0:
        fail(f"{option}: {text!r} must be positive")
    return int(n)


# --- workload selection: one meaning for every command ------------------------------------
WORKLOADS_HELP = ("workloads by index (0, 2, 0-3) or uuid (a unique prefix is enough), "
                  "comma-separated; default all")
LIMIT_HELP = "at most N workloads: the N with the fewest input+output bytes"
MAX_BYTES_HELP = "only workloads of at most B declared input+output bytes (e.g. 1e9, 512M, 2G)"

_RANGE_RX = re.compile(r"^(\d+)-(\d+)$")


def parse_workload_spec(problem: "Problem", spec: str | None, option: str = "--workloads") -> list["Workload"]:
    """The workloads ``spec`` names, in the order given, without repeats.

    Each comma-separated item is an index into the problem's workload list (``2``), an
    inclusive range (``0-3``), or a workload uuid or unique uuid prefix. An item of digits
    only is an index when it is in range, else it must be a uuid prefix. Raises SpecError
    naming the problem, ``option`` and the item for an out-of-range index, an unknown or
    ambiguous uuid, or a spec that selects nothing."""
    from ..errors import SpecError

    ws = problem.workloads
    if spec is None:
        return list(ws)
    items = [x.strip() for x in str(spec).split(",") if x.strip()]
    if not items:
        raise SpecError(problem.path, option, f"{spec!r} names no workload")
    n = len(ws)
    span = f"0-{n - 1}" if n else "none"
    out: list = []

    def by_uuid(key: str):
        exact = [w for w in ws if w.uuid == key]
        hits = exact or [w for w in ws if w.uuid.startswith(key)]
        return hits

    for it in items:
        m = _RANGE_RX.match(it)
        if m and not by_uuid(it):
            a, b = int(m.group(1)), int(m.group(2))
            if a > b:
                raise SpecError(problem.path, option, f"range {it!r} is empty (start > end)")
            if b >= n:
                raise SpecError(problem.path, option,
                                f"range {it!r} is out of range: the problem has {n} workloads ({span})")
            out.extend(ws[a:b + 1])
            continue
        if it.isdigit() and int(it) < n:
            out.append(ws[int(it)])
            continue
        hits = by_uuid(it)
        if len(hits) == 1:
            out.append(hits[0])
            continue
        if it.isdigit():
            raise SpecError(problem.path, option,
                            f"index {it} is out of range: the problem has {n} workloads ({span})")
        if not hits:
            raise SpecError(problem.path, option, f"no workload has uuid {it!r}")
        raise SpecError(problem.path, option,
                        f"{it!r} is a prefix of {len(hits)} workload uuids (give more of it)")
    seen: set[str] = set()
    uniq = []
    for w in out:
        if w.uuid not in seen:
            seen.add(w.uuid)
            uniq.append(w)
    return uniq


def choose_workloads(problem: "Problem", spec: str | None = None, limit: int | None = None,
                     max_bytes: int | None = None, *, pool: Iterable["Workload"] | None = None,
                     option: str = "--workloads") -> list["Workload"]:
    """``--workloads`` (see :func:`parse_workload_spec`), then ``--max-bytes`` (declared
    input+output bytes, :meth:`Problem.workload_bytes`), then ``--limit`` (the N smallest by
    those bytes; ties keep file order). The result keeps the order of the selection.
    ``pool`` (e.g. after tag filters) replaces the problem's full list as the base when no
    spec is given. Raises SpecError when the filters leave nothing."""
    from ..errors import SpecError

    if limit is not None and limit < 1:
        raise SpecError(None, "--limit", f"must be >= 1, got {limit}")
    chosen = parse_workload_spec(problem, spec, option) if spec is not None else list(
        pool if pool is not None else problem.workloads)
    if max_bytes is not None:
        sized = [(w, problem.workload_bytes(w)) for w in chosen]
        kept = [w for w, b in sized if b <= max_bytes]
        if not kept and sized:
            smallest = min(b for _, b in sized)
            raise SpecError(problem.path, "--max-bytes",
                            f"no workload fits in {max_bytes:,} bytes (the smallest selected has "
                            f"{smallest:,})")
        chosen = kept
    if limit is not None and len(chosen) > limit:
        order = sorted(range(len(chosen)), key=lambda i: (problem.workload_bytes(chosen[i]), i))
        keep = set(order[:limit])
        chosen = [w for i, w in enumerate(chosen) if i in keep]
    return chosen


# --- progress -----------------------------------------------------------------------------
def _fmt_duration(s: float) -> str:
    s = max(0, int(round(s)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class EvalProgress:
    """Progress of an evaluation, on stderr (stdout stays for tables and JSON).

    On a terminal: a rich progress bar with elapsed time and ETA. Anywhere else (a pipe, a
    log file, CI): one plain line per finished workload with its status, latency, speedup
    (noise-marked) and the ETA, flushed at once, so a redirected run shows life.
    ETA: mean wall time per finished workload x workloads left.

    Use as a context manager; call :meth:`done` with each finished Trace.
    """

    def __init__(self, total: int, label: str, *, enabled: bool = True, tty: bool | None = None):
        self.total = max(int(total), 0)
        self.label = label
        self.enabled = enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.n = 0
        self.t0 = time.monotonic()
        self._prog = None
        self._task = None

    def __enter__(self) -> "EvalProgress":
        self.t0 = time.monotonic()
        if self.enabled and self.tty:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                  console=err_console, transient=True)
            self._prog.__enter__()
            self._task = self._prog.add_task(self.label, total=self.total or None)
        elif self.enabled:
            print(f"{self.label}: {self.total} workload(s) to evaluate", file=sys.stderr, flush=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)
            self._prog = None

    def stage(self, text: str) -> None:
        """Say what runs before the first workload finishes (e.g. the SOL count): the bar's
        description on a terminal, a line otherwise. The ETA counts from the last stage on, so
        the time before the evaluation does not inflate it."""
        self.t0 = time.monotonic()
        if not self.enabled:
            return
        if self._prog is not None:
            self._prog.update(self._task, description=f"{self.label}: {text}")
            return
        print(f"{self.label}: {text}", file=sys.stderr, flush=True)

    def eta_s(self) -> float | None:
        if not self.n or self.n >= self.total:
            return None
        return (time.monotonic() - self.t0) / self.n * (self.total - self.n)

    def done(self, trace: "Trace", label: str | None = None) -> None:
        self.n += 1
        if not self.enabled:
            return
        if self._prog is not None:
            self._prog.update(self._task, completed=self.n,
                              description=label or self.label)
            return
        from ..report.tables import speedup_text, unresolved_text

        ev = trace.evaluation
        perf = ev.performance
        lat = ((unresolved_text(ev.timing) if perf else None)
               or (f"{perf.latency_ms:.4g} ms" if perf else "-"))
        eta = self.eta_s()
        width = len(str(self.total))
        line = (f"[{self.n:>{width}}/{self.total}] {label or self.label} {trace.workload.uuid} "
                f"{ev.status.value} latency {lat} speedup {speedup_text(trace)}"
                f" elapsed {_fmt_duration(time.monotonic() - self.t0)}"
                + (f" ETA {_fmt_duration(eta)}" if eta is not None else ""))
        print(line, file=sys.stderr, flush=True)


def trace_appender(path: Path | None) -> Callable[["Trace"], None]:
    """A callback writing each trace to ``path`` as one JSON line, flushed (and fsync'd) at
    once: a run killed later loses no finished workload. No-op when ``path`` is None. After a
    Ctrl-C it writes nothing and raises KeyboardInterrupt (:func:`.lifetime.raise_if_interrupted`)."""
    from .lifetime import critical, raise_if_interrupted

    if path is None:
        return lambda t: raise_if_interrupted()
    from ..store import append_traces

    def write(t) -> None:
        with critical():
            append_traces(path, [t])

    return write
