"""The results store: signed lines, verification on read, manifest, merge, typed blocks."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_fixtures import leaderboard_traces, mk  # noqa: E402

import solbench.store as store  # noqa: E402
from solbench.errors import SpecError  # noqa: E402
from solbench.spec.trace import Trace  # noqa: E402
from solbench.store import auth, manifest  # noqa: E402
from solbench.store.blocks import BlockError, sol_of, telemetry_of  # noqa: E402

LEGACY = Path(__file__).resolve().parents[2] / "bench" / "results" / "suites_device" / "dlrm_0" / "results.jsonl"


def _write(path, traces):
    store.append_traces(path, traces)
    return path.read_text().splitlines()


def test_key_created_private_and_reused(_private_key_dir):
    k = auth.load_key()
    p = _private_key_dir / "trace.key"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(_private_key_dir.stat().st_mode) == 0o700
    assert len(k) == 32 and auth.load_key() == k
    os.chmod(p, 0o644)
    with pytest.raises(auth.KeyError_, match="readable or writable by others"):
        auth.load_key()


def test_sign_verify_by_hand():
    key = bytes(range(32))
    obj = {"b": 1, "a": [1.5, None]}
    signed = auth.sign(obj, key)
    # canonical form: sorted keys, no spaces
    assert auth.canonical(signed) == b'{"a":[1.5,null],"b":1}'
    import hashlib
    import hmac
    assert signed["auth"]["mac"] == hmac.new(key, b'{"a":[1.5,null],"b":1}', hashlib.sha256).hexdigest()
    assert auth.verify(signed, [key]) == ("verified", "")
    assert auth.verify({**signed, "b": 2}, [key])[0] == "bad_mac"
    assert auth.verify(signed, [bytes(32)])[0] == "unknown_key"
    assert auth.verify(obj, [key])[0] == "unsigned"


def test_append_signs_and_read_verifies(tmp_path):
    p = tmp_path / "r.jsonl"
    lines = _write(p, leaderboard_traces()[:3])
    objs = [json.loads(x) for x in lines]
    assert [o["seq"] for o in objs] == [0, 1, 2] and len({o["run_id"] for o in objs}) == 1
    assert all(o["schema_version"] == store.SCHEMA_VERSION and o["auth"]["alg"] == "HMAC-SHA256" for o in objs)
    r = store.read_store(p)
    assert not r.legacy and r.provenance == ["verified"] * 3 and not r.rejected and not r.gaps
    # upstream-shaped readers still parse a stored line (envelope dropped)
    assert Trace.from_json_line(lines[0]).definition == "p1"


def test_forged_edited_replayed_deleted_lines_are_reported(tmp_path):
    p = tmp_path / "r.jsonl"
    lines = _write(p, leaderboard_traces()[:4])
    edited = json.loads(lines[1])
    edited["evaluation"]["performance"]["latency_ms"] = 1e-6  # keeps its (now wrong) MAC
    unsigned = json.loads(lines[0])
    del unsigned["auth"]
    unsigned["solution"] = "forged"
    other_key = auth.sign({k: v for k, v in json.loads(lines[2]).items() if k != "auth"} | {"seq": 99}, bytes(32))
    text = [lines[0], json.dumps(edited), lines[3], json.dumps(unsigned), lines[0], json.dumps(other_key),
            "{not json"]  # line 3 (seq 2) deleted
    p.write_text("\n".join(text) + "\n")
    r = store.read_store(p)
    assert [t.solution for t in r.traces] == ["p1__fast", "p3__fast"]
    got = {x.line: x.state for x in r.rejected}
    assert got == {2: "bad_mac", 4: "unsigned", 5: "replayed", 6: "unknown_key", 7: "malformed"}
    assert r.gaps == {json.loads(lines[0])["run_id"]: [1, 2]}  # seq 1 edited away, seq 2 deleted
    msg = r.summary_line()
    assert "5 lines not written by solbench (excluded)" in msg and "line 2: HMAC mismatch" in msg
    # included on request, and marked
    r2 = store.read_store(p, include_unverified=True)
    assert {"unverified:bad_mac", "unverified:unsigned", "unverified:unknown_key"} <= set(r2.provenance)
    # a key given explicitly verifies the line another key signed
    r3 = store.read_store(p, keys=[bytes(32)])
    assert 6 not in {x.line for x in r3.rejected}


def test_stripping_every_mac_and_the_manifest_is_no_downgrade_to_legacy(tmp_path):
    p = tmp_path / "r.jsonl"
    lines = _write(p, leaderboard_traces()[:2])
    stripped = [json.dumps({k: v for k, v in json.loads(x).items() if k != "auth"}) for x in lines]
    p.write_text("\n".join(stripped) + "\n")
    manifest.manifest_path(p).unlink()
    r = store.read_store(p)
    assert not r.legacy and r.traces == [] and {x.state for x in r.rejected} == {"unsigned"}


def test_resume_does_not_count_forged_lines(tmp_path):
    p = tmp_path / "r.jsonl"
    lines = _write(p, leaderboard_traces()[:1])
    forged = json.loads(lines[0])
    forged["workload"]["uuid"] = "forged-workload"
    with open(p, "a") as f:
        f.write(json.dumps(forged) + "\n")
    assert store.done_keys(p) == {("h-p1-p1__fast", "w1")}


def test_legacy_file_loads_marked_and_bad_line_named(tmp_path):
    if LEGACY.is_file():
        r = store.read_store(LEGACY)
        assert r.legacy and r.traces and set(r.provenance) == {"legacy"}
        assert "unauthenticated (legacy" in r.summary_line()
    p = tmp_path / "old.jsonl"
    p.write_text(leaderboard_traces()[0].to_json_line() + "\n{bad\n")
    with pytest.raises(SpecError, match=r"old.jsonl: line 2"):
        store.read_store(p)


def test_manifest_beside_results(tmp_path):
    p = tmp_path / "r.jsonl"
    _write(p, leaderboard_traces()[:1])
    store.append_traces(p, leaderboard_traces()[1:2])  # same process: same run
    m = manifest.read_manifest(p)
    assert len(m["runs"]) == 1
    e = m["runs"][0]
    from solbench import __version__
    assert e["solbench"]["version"] == __version__ and "commit" in e["solbench"]
    assert e["host"]["python"] and "torch" in e["libs"] and ("error" in e["gpus"] or isinstance(e["gpus"], list))
    assert store.read_store(p).runs[e["run_id"]]["verified"]
    # an edited manifest entry no longer verifies
    m["runs"][0]["gpus"] = [{"name": "B200"}]
    manifest.manifest_path(p).write_text(json.dumps(m))
    assert not store.read_store(p).runs[e["run_id"]]["verified"]


def test_merge_shards(tmp_path):
    t = leaderboard_traces()
    a, b = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"
    store.append_traces(a, t[:3])
    store._RUNS.clear()  # the second shard is another run
    lines_b = _write(b, t[3:6])
    forged = json.loads(lines_b[0])
    forged["solution"] = "forged"
    with open(b, "a") as f:
        f.write(json.dumps(forged) + "\n")
    store.append_traces(b, t[:1])  # a duplicate of shard 0's first trace
    out = tmp_path / "merged.jsonl"
    res = store.merge([a, b], out)
    assert res["written"] == 6 and res["duplicates"] == 1 and len(res["left_out"]) == 1
    r = store.read_store(out)
    assert len(r.traces) == 6 and not r.rejected and len(r.runs) == 2 and all(v["verified"] for v in r.runs.values())
    with pytest.raises(SpecError, match="not empty"):
        store.merge([a], out)
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text(t[6].to_json_line() + "\n")
    with pytest.raises(SpecError, match="legacy"):
        store.merge([a, legacy], tmp_path / "m2.jsonl")
    res = store.merge([a, legacy], tmp_path / "m3.jsonl", adopt_legacy=True)
    r = store.read_store(tmp_path / "m3.jsonl")
    assert res["written"] == 4 and len(r.traces) == 4 and not r.rejected and len(r.runs) == 2


def test_typed_blocks():
    t = mk("p", "s", "w", t_k=0.5, t_ref=1.0, t_sol=0.1)
    s = sol_of(t)
    assert s.sol_ms == 0.1 and s.bound.arithmetic_intensity == pytest.approx(20.0)
    assert s.score == pytest.approx(0.9 / 1.3)
    bad = t.model_dump(mode="json")
    bad["evaluation"]["sol"]["score"] = "fast"
    with pytest.raises(ValueError, match=r"evaluation.sol.score"):  # typed at load: one place
        Trace.from_json_line(json.dumps(bad))
    t.evaluation.telemetry = {"samples": [{"sm_clock_mhz": 1980, "power_w": 300.0, "new_field": 1}]}
    assert telemetry_of(t).samples[0].sm_clock_mhz == 1980
    if LEGACY.is_file():  # the recorded H200 blocks parse
        for tr in store.read_store(LEGACY).traces[:20]:
            assert sol_of(tr) is not None and telemetry_of(tr) is not None
