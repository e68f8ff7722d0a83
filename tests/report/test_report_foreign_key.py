"""`solbench report` on a results file written on another machine (a GPU host's signed
traces, bench/results/device_*): every line is signed with a key not available here, so
none is accepted. The error says so and names the two ways on (docs/reports.md): the other
machine's key in SOLBENCH_TRACE_KEYS, or --include-unverified."""

from __future__ import annotations

import json

from report_fixtures import leaderboard_traces
from typer.testing import CliRunner

import solbench.store as store
from solbench.cli import app
from solbench.store import auth


def _foreign_file(tmp_path):
    """Four traces signed with a key that is not this user's (32 zero bytes), and that key's
    file, as another machine would have it."""
    here = tmp_path / "here.jsonl"
    store.append_traces(here, leaderboard_traces()[:4])
    other_key = bytes(32)
    lines = []
    for line in here.read_text().splitlines():
        d = {k: v for k, v in json.loads(line).items() if k != "auth"}
        lines.append(json.dumps(auth.sign(d, other_key)))
    p = tmp_path / "gpu_host.jsonl"
    p.write_text("\n".join(lines) + "\n")
    key_file = tmp_path / "gpu_host.key"
    key_file.write_text(other_key.hex())  # trace.key holds the key in hex
    key_file.chmod(0o600)
    return p, key_file


def test_no_accepted_trace_names_the_ways_to_read_them(tmp_path):
    p, _ = _foreign_file(tmp_path)
    r = CliRunner().invoke(app, ["report", str(p)])
    assert r.exit_code == 2
    err = " ".join(r.stderr.split())
    assert f"error: no accepted traces in {p} (4 lines failed authentication" in err
    assert "SOLBENCH_TRACE_KEYS" in err and "--include-unverified" in err
    # each way on reads the four traces
    assert CliRunner().invoke(app, ["report", str(p), "--include-unverified"]).exit_code == 0


def test_the_other_machines_key_verifies_its_lines(tmp_path, monkeypatch):
    p, key_file = _foreign_file(tmp_path)
    monkeypatch.setenv("SOLBENCH_TRACE_KEYS", str(key_file))
    r = CliRunner().invoke(app, ["report", str(p), "--format", "json"])
    assert r.exit_code == 0, r.stderr


def test_an_empty_file_gets_no_authentication_hint(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    r = CliRunner().invoke(app, ["report", str(p)])
    assert r.exit_code == 2
    assert "failed authentication" not in r.stderr and "no accepted traces" in r.stderr


def test_compare_refuses_a_side_with_no_accepted_trace(tmp_path):
    """Before: an empty table, an empty summary and exit 0 (every line excluded silently
    but for a stderr warning)."""
    p, _ = _foreign_file(tmp_path)
    mine = tmp_path / "mine.jsonl"
    store.append_traces(mine, leaderboard_traces()[:4])
    r = CliRunner().invoke(app, ["compare", str(mine), str(p)])
    assert r.exit_code == 2
    err = " ".join(r.stderr.split())
    assert f"error: no accepted traces in {p} (4 lines failed authentication" in err
    assert "--include-unverified" in err
    ok = CliRunner().invoke(app, ["compare", str(mine), str(p), "--include-unverified", "--format", "json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["counts"]
    # an empty file still compares: every pair is only in A
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = CliRunner().invoke(app, ["compare", str(mine), str(empty), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["counts"] == {"only in A": 4}
