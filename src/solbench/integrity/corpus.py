"""Run the adversarial corpus through the real harness and classify each verdict.

Usage::

    python -m solbench.integrity.corpus tests/adversarial [--device cpu|cuda] [--json]
        [--jobs N] [--only SUBSTR ...] [--skip-slow]

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
"any" and "cuda". Exit status: 0 when nothing was missed and nothing honest was flagged.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: CPU-friendly evaluation settings for corpus runs (small counts keep a run short;
#: hostile code is still sampled in timed iterations)
CORPUS_TIMEOUT_S = 20.0


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
                             max_log_chars=c.get("max_log_chars"), slow=bool(c.get("slow", False))))
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


def eval_config(device: str):
    """The harness configuration used for corpus runs: the harness defaults, with the
    device set and the per-call timeout short enough that the hang candidate costs little."""
    from ..harness import EvalConfig

    fields = set(getattr(EvalConfig, "model_fields", {}) or getattr(EvalConfig, "__dataclass_fields__", {}))
    kwargs: dict[str, Any] = {"device": device}
    for name in ("timeout_s", "call_timeout_s", "timeout"):
        if name in fields:
            kwargs[name] = CORPUS_TIMEOUT_S
            break
    return EvalConfig(**{k: v for k, v in kwargs.items() if k in fields or k == "device"})


def run_entry(corpus_dir: str, entry: Entry, device: str) -> Outcome:
    """Evaluate one corpus entry with the real harness and classify the verdict."""
    from ..harness import evaluate
    from ..spec import load_problem, load_solution
    from .static_audit import audit_solution

    base = Path(corpus_dir)
    t0 = time.perf_counter()
    problem = load_problem(base / entry.problem)
    solution = load_solution(base / entry.file, problem)
    static = sorted({f.check for f in audit_solution(solution, problem.definition)})
    status, hack, other, log_chars, detail = "HARNESS_ERROR", [], [], 0, ""
    try:
        traces = evaluate(problem, solution, eval_config(device))
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
    log_ok = entry.max_log_chars is None or log_chars <= entry.max_log_chars
    if not log_ok and verdict in ("caught", "ok"):
        verdict = "missed" if entry.kind == "hostile" else "false_positive"
        detail = f"log of {log_chars} chars exceeds the cap {entry.max_log_chars}; " + detail
    return Outcome(file=entry.file, kind=entry.kind, cls=entry.cls, problem=entry.problem,
                   expect=entry.expect, status=status, verdict=verdict, hack_findings=hack,
                   other_findings=sorted(set(other)), static_rules=static,
                   static_verdict=static_verdict, log_chars=log_chars, log_ok=log_ok,
                   seconds=round(time.perf_counter() - t0, 2), detail=detail)


def run_corpus(corpus_dir: str | Path, device: str = "cpu", *, jobs: int = 1,
               only: list[str] | None = None, skip_slow: bool = False,
               progress=None) -> dict[str, Any]:
    """Run the selected corpus entries; returns {"device", "summary", "results"}.

    ``jobs`` > 1 evaluates that many candidates at once, each from its own spawned driver
    process (the harness still gives every candidate its own worker).
    """
    corpus_dir = Path(corpus_dir).resolve()
    entries = select(load_manifest(corpus_dir), device, only, skip_slow)
    results: list[Outcome] = []
    t0 = time.perf_counter()
    if jobs <= 1:
        for e in entries:
            r = run_entry(str(corpus_dir), e, device)
            results.append(r)
            if progress:
                progress(r)
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
            futs = {ex.submit(run_entry, str(corpus_dir), e, device): e for e in entries}
            for fut in as_completed(futs):
                e = futs[fut]
                try:
                    r = fut.result()
                except Exception as exc:  # noqa: BLE001 - the driver process died
                    r = Outcome(file=e.file, kind=e.kind, cls=e.cls, problem=e.problem,
                                expect=e.expect, status="HARNESS_ERROR",
                                verdict="missed" if e.kind == "hostile" else "false_positive",
                                detail=f"driver process failed: {type(exc).__name__}: {exc}")
                results.append(r)
                if progress:
                    progress(r)
        order = {e.file: i for i, e in enumerate(entries)}
        results.sort(key=lambda r: order[r.file])
    return {"device": device, "summary": summarize(results, time.perf_counter() - t0),
            "results": [asdict(r) for r in results]}


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
    from rich.table import Table

    con = Console()
    t = Table(title=f"adversarial corpus on {report['device']}")
    for col in ("candidate", "kind", "class", "status", "verdict", "evidence", "static", "s"):
        t.add_column(col, overflow="fold")
    colours = {"caught": "green", "ok": "green", "missed": "red", "false_positive": "red"}
    for r in report["results"]:
        ev = ", ".join(sorted({h["check"] for h in r["hack_findings"]})) or (r["detail"] or "")[:80]
        st = ",".join(x.removeprefix("audit.") for x in r["static_rules"]) or "-"
        if r["static_verdict"] != "ok":
            st = f"[red]{st} ({r['static_verdict']})[/red]"
        c = colours.get(r["verdict"], "white")
        t.add_row(r["file"], r["kind"], r["cls"], r["status"], f"[{c}]{r['verdict']}[/{c}]", ev, st,
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
    args = ap.parse_args(argv)
    if not (args.corpus_dir / "corpus.toml").is_file():
        print(f"error: {args.corpus_dir}: no corpus.toml", file=sys.stderr)
        return 2

    def progress(r: Outcome) -> None:
        print(f"{r.verdict:>14}  {r.status:<20} {r.file} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)

    report = run_corpus(args.corpus_dir, args.device, jobs=args.jobs, only=args.only,
                        skip_slow=args.skip_slow, progress=progress)
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        _print_table(report)
    s = report["summary"]
    return 0 if not s["missed"] and not s["false_positives"] else 1


if __name__ == "__main__":
    sys.exit(main())
