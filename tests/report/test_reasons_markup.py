"""The reason of every failure in the run summary (issue 35 item 4) and the one rich-markup
helper (item 8), without running anything."""

from __future__ import annotations

import re
from pathlib import Path

from report_fixtures import mk
from rich.console import Console

import solbench
from solbench.report.markup import TextTable, escape_markup, styled
from solbench.report.summary import unit_results
from solbench.spec.trace import Status


def _render(r) -> str:
    c = Console(width=200, record=True, file=open("/dev/null", "w"))
    c.print(r)
    return c.export_text()


def test_run_summary_unit_names_why_it_failed():
    t_out = mk("p1", "p1__slow", "w1", status=Status.TIMEOUT)
    t_out.evaluation.log = "worker: started\ncall 3 exceeded its 10.0 s limit (TIMEOUT)"
    t_out.evaluation.correctness = None
    t_rt = mk("p2", "p2__crash", "w1", status=Status.RUNTIME_ERROR)
    t_rt.evaluation.log = "Traceback ...\nworker exited with code -11 (SIGSEGV) during call"
    t_rt.evaluation.correctness = None
    ok = mk("p3", "p3__fine", "w1")
    why = {u.label: u.reason for u in unit_results([t_out, t_rt, ok])}
    assert why == {"p1__slow": "TIMEOUT: call 3 exceeded its 10.0 s limit (TIMEOUT)",
                   "p2__crash": "RUNTIME_ERROR: worker exited with code -11 (SIGSEGV) during call",
                   "p3__fine": ""}


def test_text_table_prints_cells_title_and_headers_verbatim():
    t = TextTable(title="static audit of cand[v2].py")
    t.add_column("snippet [code]")
    t.add_row("_CACHE[key] = out")
    t.add_row(styled("[red]not markup[/red]", "green"))
    t.caption = "pip install 'solbench[ray]'"
    text = " ".join(_render(t).split())  # the title and caption wrap to the table's width
    for s in ("static audit of cand[v2].py", "snippet [code]", "_CACHE[key] = out",
              "[red]not markup[/red]", "pip install 'solbench[ray]'"):
        assert s in text, s
    c = Console(width=200, record=True, file=open("/dev/null", "w"))
    c.print(f"[red]error:[/red] {escape_markup('_CACHE[key] = out')}")
    assert c.export_text().strip() == "error: _CACHE[key] = out"


def test_every_rich_table_goes_through_the_one_helper():
    """A plain rich Table reads markup from its cells; solbench builds every table with
    report.markup.TextTable (a new command that imports rich's Table fails here)."""
    root = Path(solbench.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "markup.py" and re.search(r"from rich\.table import Table\b(?! as)|rich\.table\.Table\(",
                                                        p.read_text())]
    assert offenders == []
