"""``solbench report``: a static HTML report (no server, no script) and terminal formats.

Layout of the output folder::

    index.html             headline, sources (verified / legacy / rejected lines), one leaderboard
                           per (suite, hardware), the figures, the list of problems
    problems/<name>.html   one page per problem: each workload x candidate with latency, reference,
                           T_SOL, score, headroom, status and every finding with its evidence
    figures/*.png          matplotlib figures (report.figures)
    report.json            every number shown (leaderboards, figure statistics, sources)
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from . import figures as F
from .aggregate import RANKING, CandidateRow, leaderboards, units, unscored_note, unscored_text
from .records import ResultSet, TraceRow
from .tables import UNRESOLVED_LEGEND

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1500px;color:#1d1d1f;padding:0 16px}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:12px}th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}
td.ax{max-width:260px;word-break:break-all;text-align:left}
th{background:#f3f4f6}td.l,th.l{text-align:left}tr:nth-child(even) td{background:#fafafa}
.PASSED{color:#137333}.REWARD_HACK{color:#b00020;font-weight:600}.INCORRECT_NUMERICAL,.INCORRECT_STRICT,.INCORRECT_SHAPE,.INCORRECT_DTYPE{color:#c5221f}
.RUNTIME_ERROR,.COMPILE_ERROR,.TIMEOUT{color:#8e24aa}.warn{background:#fff4e5;border:1px solid #f0c36d;padding:8px 12px;margin:8px 0}
.bad{background:#fdecea;border:1px solid #f5a3a3;padding:8px 12px;margin:8px 0}
.figs img{max-width:100%;border:1px solid #eee;margin:6px 0}.muted{color:#666;font-size:12px}
details pre{white-space:pre-wrap;font-size:11px;background:#f6f8fa;padding:6px;margin:2px 0}
.headline td:first-child{text-align:left}.scroll{overflow-x:auto}
"""


def _f(v, spec=".3g"):
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def _pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


def _page(title: str, body: str, up: str = "") -> str:
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head>"
            f"<body>{up}{body}</body></html>\n")


class Html(str):
    """A table cell that is markup this module built (links, status badges). Every other
    cell is escaped: candidate labels, problem names and axes come from files a candidate's
    author controls, so a plain string starting with ``<`` must never reach the page raw."""


def _table(head: list[str], rows: list[list[Any]], left: int = 1, cls: str = "") -> str:
    h = "".join(f"<th class=l>{escape(c)}</th>" if i < left else f"<th>{escape(c)}</th>" for i, c in enumerate(head))
    body = []
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            c = str(c) if isinstance(c, Html) else escape(str(c))
            cells.append(f"<td class=l>{c}</td>" if i < left else f"<td>{c}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class=scroll><table class='{cls}'><tr>{h}</tr>{''.join(body)}</table></div>"


LEADER_COLS = ["rank", "candidate", "problems", "coverage", "correct", "incorrect", "hack", "SOL score",
               "raw SOL score", "SOL score (correct)", "fast_0", "fast_1", "in noise (not in fast_1)",
               "raw fast_1", "fast_1.5", "fast_2", "geomean speedup", "median speedup", "mean h",
               "workloads p/i/h"]

#: the leaderboard columns a terminal shows (the rest would fold every header)
TERMINAL_COLS = ["rank", "candidate", "problems", "correct", "incorrect", "hack", "SOL score", "raw SOL score",
                 "fast_0", "fast_1", "in noise (not in fast_1)", "fast_2", "geomean speedup", "workloads p/i/h"]

_SHORT = {"in noise (not in fast_1)": "in noise", "geomean speedup": "geomean speedup",
          "workloads p/i/h": "p/i/h"}

#: under every leaderboard: what the noise column means
NOISE_NOTE = ("fast_p counts a speedup above p only when the low end of its noise interval (reference "
              "Q1 / candidate Q3) is above p too; 'in noise' = correct problems whose speedup is above 1 "
              "but within the run's timing noise, left out of fast_1 (docs/reports.md)")


def leader_cells(c: CandidateRow) -> list[Any]:
    return [c.rank, c.label, c.problems, _pct(c.coverage), c.correct, c.incorrect, c.hack, _f(c.mean_sol_score),
            _f(c.raw_mean_sol_score), _f(c.mean_sol_score_correct), _pct(c.fast_p.get("0")),
            _pct(c.fast_p.get("1")), c.fast_p_left_out.get("1", 0), _pct(c.raw_fast_p.get("1")), _pct(c.fast_p.get("1.5")), _pct(c.fast_p.get("2")),
            _f(c.geomean_speedup), _f(c.median_speedup), _f(c.mean_headroom),
            f"{c.workloads_passed}/{c.workloads_incorrect}/{c.workloads_hack}"]


def report_data(rs: ResultSet) -> dict[str, Any]:
    """Every number of the report, JSON-ready (also ``--format json``)."""
    lbs = leaderboards(rs.rows)
    return {
        "sources": [{"file": str(r.path), "legacy": r.legacy, "counts": r.counts,
                     "rejected": [str(x) for x in r.rejected],
                     "runs": [{k: v.get(k) for k in ("run_id", "started", "verified")} |
                              {"solbench": v.get("solbench"), "gpus": v.get("gpus")}
                              for v in r.runs.values()]} for r in rs.reads],
        "traces": len(rs.rows),
        "leaderboards": [{"suite": s, "hardware": hw, "candidates": [c.to_json() for c in cs]}
                         for (s, hw), cs in lbs.items()],
    }


def render_terminal(rs: ResultSet, fmt: str) -> str | Any:
    """``table`` (a rich renderable list), ``json`` (text) or ``markdown`` (text)."""
    data = report_data(rs)
    if fmt == "json":
        return json.dumps(data, indent=1, allow_nan=False, default=str)
    lbs = leaderboards(rs.rows)
    if fmt == "markdown":
        out = []
        for (s, hw), cs in lbs.items():
            out.append(f"### {s} on {hw}\n")
            out.append("| " + " | ".join(LEADER_COLS) + " |")
            out.append("|" + "---|" * len(LEADER_COLS))
            for c in cs:
                out.append("| " + " | ".join(str(x) for x in leader_cells(c)) + " |")
            if note := unscored_note(cs):
                out.append(f"\nNo SOL score: {note}.")
            out.append("")
        if lbs:
            out.append(f"Ranked: {RANKING}. {NOISE_NOTE}.")
        return "\n".join(out)
    from .markup import TextTable as Table

    tables = []
    keep = [LEADER_COLS.index(c) for c in TERMINAL_COLS]
    for (s, hw), cs in lbs.items():
        note = unscored_note(cs)
        t = Table(title=f"{s} on {hw}", caption=(f"No SOL score: {note}. " if note else "") + f"ranked: {RANKING}. "
                  f"{NOISE_NOTE}. All columns: --format markdown|json or the HTML report")
        width = max([len(c.label) for c in cs] + [9])
        for col in TERMINAL_COLS:
            t.add_column(_SHORT.get(col, col), justify="left" if col == "candidate" else "right", overflow="fold",
                         min_width=width if col == "candidate" else None)
        for c in cs:
            cells = leader_cells(c)
            t.add_row(*(str(cells[i]) for i in keep))
        tables.append(t)
    return tables


def _sources_html(rs: ResultSet) -> str:
    rows, notes = [], []
    for r in rs.reads:
        c = r.counts
        state = "unauthenticated (legacy)" if r.legacy else "authenticated"
        runs = ", ".join(f"{k[:8]} ({'verified' if v.get('verified') else 'NOT verified'})" for k, v in r.runs.items()) or "-"
        rows.append([str(r.path), state, c.get("verified", 0), c.get("legacy", 0), c.get("rejected", 0),
                     sum(1 for p in r.provenance if p.startswith("unverified")), runs])
        if r.rejected:
            notes.append(f"<div class=bad><b>{escape(str(r.path))}</b>: {len(r.rejected)} lines not written by "
                         "solbench (edited, forged, replayed, or signed with a key not available here); "
                         f"{'included as asked' if any(p.startswith('unverified') for p in r.provenance) else 'excluded'}:"
                         "<ul>" + "".join(f"<li>{escape(str(x))}</li>" for x in r.rejected[:20]) + "</ul></div>")
        for run, seqs in r.gaps.items():
            notes.append(f"<div class=bad>{escape(str(r.path))}: run {run[:8]} is missing lines (seq "
                         f"{escape(', '.join(map(str, seqs[:10])))}): deleted after writing</div>")
    legacy = sum(r.counts.get("legacy", 0) for r in rs.reads)
    if legacy:
        notes.insert(0, f"<div class=warn>{legacy} traces come from files written before trace authentication: "
                     "marked <b>unauthenticated (legacy)</b>; solbench cannot tell whether they were edited.</div>")
    return "".join(notes) + _table(["results file", "state", "verified", "legacy", "rejected", "included unverified",
                                    "runs (manifest)"], rows)


def _why_cell(r: TraceRow) -> str | Html:
    """The deciding check or finding of a trace that did not pass, with its log folded
    under it (``report.tables.failure_reason``); "-" for a PASSED trace."""
    if r.status == "PASSED":
        return "-"
    reason = escape(r.reason or r.status)
    if not r.log.strip():
        return Html(reason)
    log = r.log if len(r.log) <= 20000 else r.log[:10000] + "\n...\n" + r.log[-10000:]
    return Html(f"{reason}<details><summary>failure log</summary><pre>{escape(log)}</pre></details>")


def _problem_page(definition: str, rows: list[TraceRow], finds_by: dict) -> str:
    rows = sorted(rows, key=lambda r: (r.workload, r.label))
    ref = {}
    for r in rows:
        if r.reference_latency_ms is not None:
            ref.setdefault(r.workload, []).append(r.reference_latency_ms)
    head = ["workload", "axes", "candidate", "status", "latency ms", "reference ms", "T_SOL ms", "speedup",
            "SOL distance", "SOL score", "headroom h", "bottleneck", "timing", "provenance", "why", "findings"]
    body = []
    for r in rows:
        fs = finds_by.get((r.file, r.line), [])
        fcell = ""
        if fs:
            fcell = "<details><summary>" + escape(", ".join(f"{f.check_name} ({f.severity})" for f in fs)) + "</summary>"
            fcell += "".join(f"<pre>{escape(f.check_name)} [{escape(f.severity)}]: {escape(f.message)}\nevidence: "
                             f"{escape(json.dumps(json.loads(f.evidence), indent=1)[:4000])}</pre>" for f in fs)
            fcell += "</details>"
        body.append([r.workload[:8], r.axes[:60], r.label, Html(f"<span class={escape(str(r.status))}>{escape(str(r.status))}</span>"),
                     r.unres_latency if r.unres_latency else
                     _f(r.latency_ms if r.latency_ms is not None else r.raw_latency_ms, ".4g")
                     + ("" if r.latency_ms is not None or r.raw_latency_ms is None else " (raw)"),
                     r.unres_reference if r.unres_reference else
                     _f(r.reference_latency_ms if r.reference_latency_ms is not None else r.raw_reference_ms, ".4g"),
                     _f(r.t_sol_ms, ".4g"),
                     (r.speedup_bound or f"unres. ({r.unresolved_side})") if r.unresolved_side else _f(r.speedup),
                     _f(r.sol_distance), _f(r.sol_score),
                     _f(r.headroom), r.bottleneck or "-",
                     f"{r.timing_method or '-'} n={r.n_samples or 0}", r.provenance,
                     _why_cell(r), Html(fcell) if fcell else "-"])
    legend = (f"<p class=muted>{escape(UNRESOLVED_LEGEND)}</p>" if any(r.unresolved_side for r in rows) else "")
    # correct candidates first (as every leaderboard ranks), then by score and speedup
    us = sorted(units(rows), key=lambda u: (not u.correct, -(u.sol_score or 0.0), u.speedup is None,
                                            -(u.speedup or 0.0), u.label))
    summ = _table(["candidate", "workloads", "passed", "incorrect", "hack", "SOL score", "raw SOL score", "speedup (geomean)"],
                  [[u.label, u.workloads, u.passed, u.failed, u.hacked,
                    f"- ({unscored_text(u)})" if unscored_text(u) else _f(u.sol_score), _f(u.raw_sol_score),
                    _f(u.speedup)] for u in us])
    hw = sorted({r.hardware for r in rows})
    return _page(definition, f"<h1>{escape(definition)}</h1><p class=muted>suite {escape(rows[0].suite)}; hardware "
                 f"{escape(', '.join(hw))}; {len({r.workload for r in rows})} workloads; reference = the problem's "
                 "eager reference timed in the same run; T_SOL from the SOL model named in each trace</p>"
                 f"<h2>candidates</h2>{summ}<h2>workloads</h2>"
                 + _table(head, body, left=4) + legend, up="<p><a href='../index.html'>&larr; report</a></p>")


def _top_text(best: CandidateRow | None) -> str:
    """The headline's top candidate: ``name (SOL score 0.71)`` or, without SOL scores,
    ``name (3/4 correct, 1.8x)``; ``none correct`` when no candidate has a correct problem
    (an incorrect or hacked candidate is never named top)."""
    if best is None or best.correct == 0:
        return "none correct"
    if best.mean_sol_score is not None:
        return f"{best.label} (SOL score {_f(best.mean_sol_score)})"
    sp = f", geomean speedup {_f(best.geomean_speedup)}x" if best.geomean_speedup is not None else ""
    return f"{best.label} ({best.correct}/{best.problems} correct{sp})"


def build_report(rs: ResultSet, out_dir: str | Path, title: str = "solbench report") -> dict[str, Any]:
    """Write the HTML report; returns report.json's content (with the figures' numbers)."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    (out / "problems").mkdir(parents=True, exist_ok=True)
    data = report_data(rs)
    lbs = leaderboards(rs.rows)
    us = units(rs.rows)
    figs: dict[str, Any] = {}
    figs["speedup_vs_sol_distance"] = F.fig_speedup_vs_distance(rs.rows, out / "figures" / "speedup_vs_sol_distance.png")
    figs["score_vs_headroom"] = F.fig_score_vs_headroom(rs.rows, out / "figures" / "score_vs_headroom.png")
    figs["roofline"] = F.fig_roofline(rs.rows, out / "figures" / "roofline.png")
    group_figs = []
    for (s, hw) in lbs:
        gu = [u for u in us if u.suite == s and u.hardware == hw]
        k = slug(f"{s}_{hw}")
        fp = F.fig_fast_p(gu, out / "figures" / f"fast_p_{k}.png", title=f"fast_p against p: {s} on {hw}")
        sd = F.fig_score_distribution(gu, out / "figures" / f"sol_score_{k}.png", title=f"SOL score per problem: {s} on {hw}")
        figs[f"fast_p/{s}/{hw}"] = fp
        figs[f"sol_score_distribution/{s}/{hw}"] = sd
        group_figs.append((s, hw, k))
    data["figures"] = figs

    parts = [f"<h1>{escape(title)}</h1>",
             f"<p class=muted>{len(rs.rows)} traces from {len(rs.reads)} results files; definitions of every "
             "figure: docs/reports.md (SOL score and headroom: SOL-ExecBench; fast_p: KernelBench).</p>"]
    head_rows = []
    for (s, hw), cs in lbs.items():
        best = cs[0] if cs else None
        n_prob = len({u.definition for u in us if u.suite == s and u.hardware == hw})
        head_rows.append([f"{s} on {hw}", len(cs), n_prob, _top_text(best)])
    head_rows.append(["speedup vs SOL distance: Pearson r (log-log)", "", figs["speedup_vs_sol_distance"]["n"],
                      _f(figs["speedup_vs_sol_distance"]["pearson_r_log"])])
    head_rows.append(["SOL score vs headroom reclaimed: Pearson r", "", figs["score_vs_headroom"]["n"],
                      _f(figs["score_vs_headroom"]["pearson_r"])])
    parts.append("<h2>headline</h2>" + _table(["", "candidates", "problems / points", "top (leaderboard rank 1) / r"],
                                              head_rows, cls="headline"))
    parts.append("<h2>sources</h2>" + _sources_html(rs))
    for (s, hw), cs in lbs.items():
        parts.append(f"<h2 id='lb-{slug(s + '_' + hw)}'>leaderboard: {escape(s)} on {escape(hw)}</h2>"
                     f"<p class=muted>ranked: {escape(RANKING)}. The mean SOL score is over the problems each "
                     "candidate attempted (coverage: attempted / all problems of the suite here); raw = as "
                     "the candidates' own timings claim, before reward-hack verdicts; p/i/h = passed / incorrect / "
                     f"hack workloads. {escape(NOISE_NOTE)}. Definitions: docs/reports.md.</p>"
                     + _table(LEADER_COLS, [leader_cells(c) for c in cs], left=2)
                     + (f"<p class=muted>No SOL score: {escape(note)}.</p>" if (note := unscored_note(cs)) else ""))
    parts.append("<h2>figures</h2><div class=figs>")
    parts.append("<img src='figures/speedup_vs_sol_distance.png' alt='speedup vs SOL distance'>"
                 "<img src='figures/score_vs_headroom.png' alt='SOL score vs headroom reclaimed'>")
    for s, hw, k in group_figs:
        parts.append(f"<img src='figures/fast_p_{k}.png' alt='fast_p {escape(s)} {escape(hw)}'>"
                     f"<img src='figures/sol_score_{k}.png' alt='SOL score distribution {escape(s)} {escape(hw)}'>")
    parts.append("<img src='figures/roofline.png' alt='roofline'></div>")
    by_def: dict[str, list[TraceRow]] = defaultdict(list)
    for r in rs.rows:
        by_def[r.definition].append(r)
    finds_by: dict = defaultdict(list)
    for f in rs.findings:
        finds_by[(f.file, f.line)].append(f)
    plist = []
    for d in sorted(by_def):
        rr = by_def[d]
        (out / "problems" / f"{slug(d)}.html").write_text(_problem_page(d, rr, finds_by))
        st = defaultdict(int)
        for r in rr:
            st[r.status] += 1
        plist.append([Html(f"<a href='problems/{slug(d)}.html'>{escape(d)}</a>"), rr[0].suite, len({r.workload for r in rr}),
                      len({r.label for r in rr}), ", ".join(f"{k} {v}" for k, v in sorted(st.items()))])
    parts.append("<h2>problems</h2>" + _table(["problem", "suite", "workloads", "candidates", "traces by status"], plist, left=2))
    (out / "index.html").write_text(_page(title, "".join(parts)))
    (out / "report.json").write_text(json.dumps(data, indent=1, allow_nan=False, default=str) + "\n")
    return data
