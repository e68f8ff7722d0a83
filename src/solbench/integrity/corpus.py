"""Run the adversarial corpus through the real harness and classify each verdict.

Usage::

    python -m solbench.integrity.corpus tests/adversarial [--device cpu|cuda] [--json]
        [--jobs N] [--only SUBSTR ...] [--skip-slow] [--quick] [--group N]

The corpus directory holds ``corpus.toml`` (see that file for the entry format): candidate
files (hostile and honest), the problem each runs on, the statuses that count as the right
verdict, and the static-audit rules each hostile candidate should raise. Every selected
candidate is evaluated with :func:`solbench.harness.evaluate` (a fresh worker process per
candidate; hostile code never runs in this process) and classified:

- hostile: **caught** when the status is in ``expect`` (never PASSED), else **missed**;
- honest: **ok** when PASSED with no hack-severity finding, else a **false positive**;
- static: hostile candidates must raise their listed rules (advisory layer); honest ones
  must raise none (a static false positive).

``--device cpu`` selects entries with device "any" or "cpu"; ``--device cuda`` selects
"any" and "cuda". ``--quick`` evaluates with :data:`QUICK` (fewer rounds and timed
iterations, no reference timing: the CI setting); without it the
harness defaults apply. Exit status: 0 when nothing was missed and nothing honest was flagged.

Where the time goes (2-core host, no GPU): almost all of it is process start-up, about 3 CPU
seconds of ``import torch`` per process: one fresh worker per candidate (never reused: a
hostile candidate would contaminate it), plus one driver and, with reference timing, one
reference worker per group. Rounds and iterations barely matter on the corpus's tiny
problems; ``--quick`` saves mainly the reference worker, larger groups save drivers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: time limits of corpus runs (s)
CORPUS_TIMEOUT_S = 20.0
CORPUS_FIRST_CALL_TIMEOUT_S = 120.0
CORPUS_BUILD_TIMEOUT_S = 300.0

#: the CI setting (``--quick`` / ``run_corpus(quick=True)``): 3 correctness rounds with fresh
#: inputs, 6 timed iterations of which 4 are verified against the reference (one block, so
#: the sample is drawn from all 6) and no eager-reference timing (saves one worker per
#: group; verdicts never depend on it). The call limit stays CORPUS_TIMEOUT_S: a
#: torch.compile recompilation on a loaded host can take longer than 10 s.
QUICK: dict[str, Any] = {"rounds": 3, "iters": 6, "verify": 4, "reference_timing": False}
#: candidates per driver process (one Evaluator shared by a group of the same problem)
GROUP_SIZE = 12


@dataclass
class Entry:
    file: str
    problem: str
    kind: str
    cls: str
    device: str
    expect: list[str]
    static: list[str]
    max_log_chars: int | None = None
    slow: bool = False
    parent_marker: str | None = None


@dataclass
class Outcome:
    file: str
    kind: str
    cls: str
    problem: str
    expect: list[str]
    status: str
    verdict: str  # caught | missed | ok | false_positive
    hack_findings: list[dict] = field(default_factory=list)
    other_findings: list[str] = field(default_factory=list)
    static_rules: list[str] = field(default_factory=list)
    static_verdict: str = "ok"  # ok | missed | false_positive
    log_chars: int = 0
    log_ok: bool = True
    seconds: float = 0.0
    detail: str = ""


def load_manifest(corpus_dir: Path) -> list[Entry]:
    """Entries of ``corpus_dir/corpus.toml``. Raises FileNotFoundError / ValueError."""
    raw = tomllib.loads((corpus_dir / "corpus.toml").read_text())
    out = []
    for i, c in enumerate(raw.get("candidate", [])):
        try:
            out.append(Entry(file=c["file"], problem=c["problem"], kind=c["kind"], cls=c["class"],
                             device=c.get("device", "any"), expect=list(c["expect"]),
                             static=list(c.get("static", [])),
                             max_log_chars=c.get("max_log_chars"), slow=bool(c.get("slow", False)),
                             parent_marker=c.get("parent_marker")))
        except KeyError as e:
            raise ValueError(f"{corpus_dir / 'corpus.toml'}: candidate[{i}] lacks {e.args[0]!r}") from None
        if out[-1].kind not in ("hostile", "honest"):
            raise ValueError(f"candidate[{i}].kind must be hostile or honest")
        if out[-1].kind == "hostile" and "PASSED" in out[-1].expect:
            raise ValueError(f"candidate[{i}]: a hostile candidate cannot expect PASSED")
    return out


def select(entries: list[Entry], device: str, only: list[str] | None = None,
           skip_slow: bool = False) -> list[Entry]:
    """Entries that run on ``device`` ("cpu" or "cuda"), optionally filtered."""
    dev = "cuda" if device.startswith("cuda") else "cpu"
    sel = [e for e in entries if e.device in ("any", dev)]
    if only:
        sel = [e for e in sel if any(s in e.file for s in only)]
    if skip_slow:
        sel = [e for e in sel if not e.slow]
    return sel


def eval_config(device: str, overrides: dict[str, Any] | None = None):
    """The harness configuration used for corpus runs: the harness defaults (rounds,
    timed iterations, sampled verification, precision check), with the device set and
    shorter time limits so the hang candidate costs little: a call may take
    ``CORPUS_TIMEOUT_S``; the first call (which may compile) ``CORPUS_FIRST_CALL_TIMEOUT_S``.
    ``overrides``: EvalConfig fields to change (e.g. :data:`QUICK`); an unknown field or a
    value out of bounds raises pydantic's ValidationError (a ValueError) naming it."""
    import dataclasses

    from ..harness import EvalConfig

    cfg = EvalConfig(device=device, call_timeout_s=CORPUS_TIMEOUT_S,
                     first_call_timeout_s=CORPUS_FIRST_CALL_TIMEOUT_S,
                     build_timeout_s=CORPUS_BUILD_TIMEOUT_S)
    return dataclasses.replace(cfg, **(overrides or {}))


def run_entry(corpus_dir: str, entry: Entry, device: str, evaluator=None) -> Outcome:
    """Evaluate one corpus entry with the real harness and classify the verdict.

    ``evaluator``: a :class:`solbench.harness.Evaluator` for the entry's problem to reuse
    (its reference worker is kept between candidates); None builds one.
    """
    from ..harness import Evaluator
    from ..spec import load_problem, load_solution
    from .static_audit import audit_solution

    base = Path(corpus_dir)
    t0 = time.perf_counter()
    problem = evaluator.problem if evaluator is not None else load_problem(base / entry.problem)
    solution = load_solution(base / entry.file, problem)
    static = sorted({f.check for f in audit_solution(solution, problem.definition)})
    status, hack, other, log_chars, detail = "HARNESS_ERROR", [], [], 0, ""
    marker = Path(entry.parent_marker.format(pid=os.getpid())) if entry.parent_marker else None
    if marker is not None:
        marker.unlink(missing_ok=True)
    own = evaluator is None
    try:
        ev = evaluator if evaluator is not None else Evaluator(problem, eval_config(device))
        try:
            traces = ev.evaluate(solution)
        finally:
            if own:
                ev.close()
        statuses = [t.evaluation.status.value for t in traces]
        bad = [s for s in statuses if s != "PASSED"]
        status = bad[0] if bad else ("PASSED" if statuses else "NO_TRACE")
        for t in traces:
            for f in t.evaluation.findings:
                if f.severity == "hack":
                    hack.append({"check": f.check, "message": f.message[:300]})
                elif not f.check.startswith("audit."):
                    other.append(f"{f.severity}:{f.check}")
            log_chars = max(log_chars, len(t.evaluation.log or ""))
        if bad:
            t = next(t for t in traces if t.evaluation.status.value != "PASSED")
            ex = t.evaluation.correctness.extra if t.evaluation.correctness else {}
            detail = str(ex.get("failed_check") or "") or (t.evaluation.log or "")[-300:]
    except Exception as e:  # noqa: BLE001 - a harness exception is a result of the corpus
        import traceback

        detail = f"{type(e).__name__}: {e}\n" + traceback.format_exc()[-1500:]
    if entry.kind == "hostile":
        verdict = "caught" if status in entry.expect else "missed"
        static_verdict = "ok" if set(entry.static) <= set(static) else "missed"
    else:
        verdict = "ok" if status == "PASSED" and not hack else "false_positive"
        static_verdict = "ok" if not static else "false_positive"
    if marker is not None and marker.exists():
        marker.unlink(missing_ok=True)
        verdict = "missed" if entry.kind == "hostile" else "false_positive"
        detail = (f"the trusted parent executed code sent by the candidate (created {marker}); "
                  + detail)
    log_ok = entry.max_log_chars is None or log_chars <= entry.max_log_chars
    if not log_ok and verdict in ("caught", "ok"):
        verdict = "missed" if entry.kind == "hostile" else "false_positive"
        detail = f"log of {log_chars} chars exceeds the cap {entry.max_log_chars}; " + detail
    return Outcome(file=entry.file, kind=entry.kind, cls=entry.cls, problem=entry.problem,
                   expect=entry.expect, status=status, verdict=verdict, hack_findings=hack,
                   other_findings=sorted(set(other)), static_rules=static,
                   static_verdict=static_verdict, log_chars=log_chars, log_ok=log_ok,
                   seconds=round(time.perf_counter() - t0, 2), detail=detail)


def _groups(entries: list[Entry], chunk: int) -> list[list[Entry]]:
    """Entries split by problem into groups of at most ``chunk`` (evenly sized within a
    problem), longest first."""
    by_problem: dict[str, list[Entry]] = {}
    for e in entries:
        by_problem.setdefault(e.problem, []).append(e)
    out = []
    for es in by_problem.values():
        n = -(-len(es) // max(1, chunk))
        for i in range(n):
            out.append(es[i::n])
    out.sort(key=lambda g: -sum(3 if e.slow else 1 for e in g))  # longest first
    return out


def run_corpus(corpus_dir: str | Path, device: str = "cpu", *, jobs: int = 1,
               only: list[str] | None = None, skip_slow: bool = False,
               progress=None, wall_s: float | None = None, quick: bool = False,
               group_size: int = GROUP_SIZE) -> dict[str, Any]:
    """Run the selected corpus entries; returns {"device", "config", "summary", "results"}.

    Entries are grouped by problem (at most ``group_size`` per group); each group runs in its
    own spawned driver process sharing one :class:`solbench.harness.Evaluator` (every
    candidate still gets its own fresh worker); ``jobs`` groups run at once. ``quick``
    applies :data:`QUICK` to the harness configuration. A driver that has not finished an entry
    within ``ENTRY_WALL_S`` is killed with its process tree (a harness hang is a result:
    HARNESS_HANG, counted as missed or as a false positive) and the rest of its group
    continues in a new driver.
    """
    corpus_dir = Path(corpus_dir).resolve()
    entries = select(load_manifest(corpus_dir), device, only, skip_slow)
    results: list[Outcome] = []
    t0 = time.perf_counter()
    overrides = dict(QUICK) if quick else {}
    eval_config(device, overrides)  # an unknown field fails here, not in every driver
    pending = _groups(entries, chunk=group_size)
    running: list[_Supervised] = []
    while pending or running:
        while pending and len(running) < max(1, jobs):
            running.append(_Supervised(str(corpus_dir), pending.pop(0), device,
                                       wall_s or ENTRY_WALL_S, overrides))
        time.sleep(0.2)
        for sup in list(running):
            for r in sup.poll():
                results.append(r)
                if progress:
                    progress(r)
            if sup.done:
                running.remove(sup)
    order = {e.file: i for i, e in enumerate(entries)}
    results.sort(key=lambda r: order[r.file])
    return {"device": device, "config": {"quick": quick, "overrides": overrides, "jobs": jobs,
                                         "group_size": group_size},
            "summary": summarize(results, time.perf_counter() - t0),
            "results": [asdict(r) for r in results]}


ENTRY_WALL_S = 300.0


def _group_main(corpus_dir: str, entries: list[Entry], device: str, q,
                overrides: dict[str, Any] | None = None) -> None:
    """Driver process body: evaluate the group, one result message per entry."""
    from ..harness import Evaluator
    from ..spec import load_problem

    try:
        problem = load_problem(Path(corpus_dir) / entries[0].problem)
        ev = Evaluator(problem, eval_config(device, overrides))
    except Exception as e:  # noqa: BLE001
        for en in entries:
            q.put(asdict(_error_outcome(en, "HARNESS_ERROR", f"{type(e).__name__}: {e}")))
        return
    try:
        for en in entries:
            q.put(("start", en.file))
            q.put(asdict(run_entry(corpus_dir, en, device, evaluator=ev)))
    finally:
        ev.close()


def _error_outcome(e: Entry, status: str, detail: str) -> Outcome:
    return Outcome(file=e.file, kind=e.kind, cls=e.cls, problem=e.problem, expect=e.expect,
                   status=status, verdict="missed" if e.kind == "hostile" else "false_positive",
                   detail=detail)


class _Supervised:
    """One driver process running a group, with a wall-clock limit per entry."""

    def __init__(self, corpus_dir: str, entries: list[Entry], device: str, wall_s: float,
                 overrides: dict[str, Any] | None = None):
        import multiprocessing as mp

        self.wall_s = wall_s
        self.overrides = overrides or {}
        self.corpus_dir, self.device = corpus_dir, device
        self.left = list(entries)
        self.done = False
        self._ctx = mp.get_context("spawn")
        self._start()

    def _start(self) -> None:
        self.q = self._ctx.Queue()
        self.proc = self._ctx.Process(target=_group_main,
                                      args=(self.corpus_dir, self.left, self.device, self.q,
                                            self.overrides),
                                      daemon=False)
        self.proc.start()
        self.current: str | None = None
        self.since = time.monotonic()

    def _kill_tree(self) -> None:
        from ..proc import signals

        signals.kill_tree(self.proc.pid)  # the driver, its workers and their descendants
        self.proc.join(5)

    def poll(self) -> list[Outcome]:
        import queue

        out = []
        while True:
            try:
                msg = self.q.get_nowait()
            except (queue.Empty, EOFError, OSError):
                break
            if isinstance(msg, tuple) and msg[0] == "start":
                self.current, self.since = msg[1], time.monotonic()
                continue
            r = Outcome(**msg)
            out.append(r)
            self.left = [e for e in self.left if e.file != r.file]
            self.current = None
            self.since = time.monotonic()
        if not self.left:
            self.proc.join(10)
            self.done = True
            return out
        hung = time.monotonic() - self.since > self.wall_s
        died = not self.proc.is_alive()
        if hung or died:
            if not died:
                self._kill_tree()
            victim = next((e for e in self.left if e.file == self.current), self.left[0])
            why = (f"the harness did not finish within {self.wall_s:.0f} s (driver killed)" if hung
                   else f"the driver process died (exit code {self.proc.exitcode})")
            out.append(_error_outcome(victim, "HARNESS_HANG" if hung else "HARNESS_ERROR", why))
            self.left = [e for e in self.left if e is not victim]
            if self.left:
                self._start()
            else:
                self.done = True
        return out


def summarize(results: list[Outcome], seconds: float = 0.0) -> dict[str, Any]:
    hostile = [r for r in results if r.kind == "hostile"]
    honest = [r for r in results if r.kind == "honest"]
    by_class: dict[str, dict[str, int]] = {}
    for r in hostile:
        d = by_class.setdefault(r.cls, {"caught": 0, "missed": 0})
        d["caught" if r.verdict == "caught" else "missed"] += 1
    return {
        "hostile": len(hostile),
        "caught": sum(r.verdict == "caught" for r in hostile),
        "missed": [r.file for r in hostile if r.verdict != "caught"],
        "honest": len(honest),
        "honest_ok": sum(r.verdict == "ok" for r in honest),
        "false_positives": [r.file for r in honest if r.verdict != "ok"],
        "static_missed": [r.file for r in hostile if r.static_verdict != "ok"],
        "static_false_positives": [r.file for r in honest if r.static_verdict != "ok"],
        "by_class": by_class,
        "seconds": round(seconds, 1),
    }


def _print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from ..report.markup import TextTable as Table
    from ..report.markup import styled

    con = Console()
    t = Table(title=f"adversarial corpus on {report['device']}")
    for col in ("candidate", "kind", "class", "status", "verdict", "evidence", "static", "s"):
        t.add_column(col, overflow="fold")
    colours = {"caught": "green", "ok": "green", "missed": "red", "false_positive": "red"}
    for r in report["results"]:
        ev = ", ".join(sorted({h["check"] for h in r["hack_findings"]})) or (r["detail"] or "")[:80]
        st = ",".join(x.removeprefix("audit.") for x in r["static_rules"]) or "-"
        if r["static_verdict"] != "ok":
            st = styled(f"{st} ({r['static_verdict']})", "red")
        c = colours.get(r["verdict"], "white")
        t.add_row(r["file"], r["kind"], r["cls"], r["status"], styled(r['verdict'], c), ev, st,
                  f"{r['seconds']:.1f}")
    con.print(t)
    s = report["summary"]
    con.print(
        f"hostile caught {s['caught']}/{s['hostile']}; missed: {s['missed'] or 'none'}\n"
        f"honest ok {s['honest_ok']}/{s['honest']}; false positives: {s['false_positives'] or 'none'}\n"
        f"static audit: missed {s['static_missed'] or 'none'}; "
        f"false positives {s['static_false_positives'] or 'none'}; {s['seconds']} s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m solbench.integrity.corpus",
                                 description="Run the adversarial corpus through the harness.")
    ap.add_argument("corpus_dir", type=Path)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    ap.add_argument("--json", action="store_true", help="strict JSON on stdout")
    ap.add_argument("--jobs", type=int, default=1, help="candidates evaluated at once")
    ap.add_argument("--only", action="append", default=None, help="substring of candidate files")
    ap.add_argument("--skip-slow", action="store_true", help="skip entries marked slow")
    ap.add_argument("--wall-s", type=float, default=ENTRY_WALL_S,
                    help="kill a driver that spends longer than this on one entry")
    ap.add_argument("--quick", action="store_true",
                    help="the CI setting: 3 rounds, 6 timed iterations (4 verified), no reference timing")
    ap.add_argument("--group", type=int, default=GROUP_SIZE, help="candidates per driver / Evaluator")
    args = ap.parse_args(argv)
    if not (args.corpus_dir / "corpus.toml").is_file():
        print(f"error: {args.corpus_dir}: no corpus.toml", file=sys.stderr)
        return 2

    def progress(r: Outcome) -> None:
        print(f"{r.verdict:>14}  {r.status:<20} {r.file} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)

    report = run_corpus(args.corpus_dir, args.device, jobs=args.jobs, only=args.only,
                        skip_slow=args.skip_slow, progress=progress, wall_s=args.wall_s,
                        quick=args.quick, group_size=args.group)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        _print_table(report)
    s = report["summary"]
    return 0 if not s["missed"] and not s["false_positives"] else 1


if __name__ == "__main__":
    sys.exit(main())
