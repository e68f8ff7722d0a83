"""bench/throughput.py's split of one trace's phases_s into the table's groups, checked against
values worked out by hand: the rests are what their phases hold beyond the listed parts, the
recorded parts of the rests (timing.fill ..., ref_timing.freeze ...) are rows of their own that
are not added to the total again, and a trace made before those parts were recorded reads 0
for them with the same groups."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("throughput_bench", ROOT / "bench" / "throughput.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


PHASES = {
    "worker_start": 0.5, "inputs": 0.01, "correctness": 0.2, "correctness.call": 0.05,
    "reference_timing": 0.3, "ref_timing.worker": 0.0, "ref_timing.profiler": 0.01,
    "ref_timing.inputs": 0.02, "ref_timing.calls": 0.1, "ref_timing.guards": 0.0,
    "ref_timing.freeze": 0.001, "ref_timing.load": 0.012, "ref_timing.noop": 0.011,
    "ref_timing.warmup": 0.025, "ref_timing.thaw": 0.001,
    "timing": 0.9, "timing.profiler": 0.01, "timing.inputs": 0.03, "timing.calls": 0.15,
    "timing.guards": 0.04, "timing.verify": 0.06, "timing.fill": 0.004, "timing.noop": 0.012,
    "timing.warmup": 0.016, "timing.reload": 0.006, "timing.late_recheck": 0.016,
    "guards_after_timing": 0.08, "sol": 0.0,
}


def test_split_by_hand():
    b = _bench()
    # 20 candidate samples of 1 ms and 20 reference samples of 2 ms: 0.06 s of kernels
    ev = {"phases_s": PHASES, "timing": {"samples_ms": [1.0] * 20}, "reference_timing": {"samples_ms": [2.0] * 20}}
    out = b.split(ev, steady_profiler=0.003)
    assert out["kernels"] == pytest.approx(0.06)
    # reference rest: 0.3 - (0 + 0.01 + 0.02 + 0.1 + 0) = 0.17, of which the recorded parts 0.05
    assert out["reference rest"] == pytest.approx(0.17)
    assert [out["reference rest: " + k] for k in ("freeze", "load", "noop", "warmup", "thaw")] == \
        pytest.approx([0.001, 0.012, 0.011, 0.025, 0.001])
    # timing rest: 0.9 - 0.3 - (0.01 + 0.03 + 0.15 + 0.04 + 0.06) = 0.31, recorded parts 0.054
    assert out["timing rest"] == pytest.approx(0.31)
    assert sum(out["timing rest: " + k] for k in b.TIMING_REST_PARTS) == pytest.approx(0.054)
    # timed calls (host): both sides' calls 0.25 less the 0.06 of kernels
    assert out["timed calls (host)"] == pytest.approx(0.19)
    # the total adds the groups only: 0.5 + 0.02 (two profiler sessions, both within the
    # steady 2 x 0.003 = 0.006 plus 0.014 of first session) + inputs 0.06 + correctness 0.2 +
    # timed calls 0.19 + guards 0.04 + verify 0.06 + rests 0.17 + 0.31 + guard check 0.08 +
    # kernels 0.06
    assert out["total"] == pytest.approx(0.5 + 0.02 + 0.06 + 0.2 + 0.19 + 0.04 + 0.06 + 0.17 + 0.31 + 0.08 + 0.06)
    assert out["CUPTI first session"] == pytest.approx(0.014) and out["profiler steady"] == pytest.approx(0.006)


def test_a_trace_before_the_parts_were_recorded_has_the_same_groups():
    b = _bench()
    old = {k: v for k, v in PHASES.items() if k.split(".", 1)[-1] not in
           set(b.TIMING_REST_PARTS) | set(b.REFERENCE_REST_PARTS) or "." not in k}
    assert "timing.fill" not in old and "ref_timing.freeze" not in old and "timing.calls" in old
    ev = {"phases_s": PHASES, "timing": {"samples_ms": [1.0]}, "reference_timing": None}
    ev_old = dict(ev, phases_s=old)
    new_out, old_out = b.split(ev, 0.003), b.split(ev_old, 0.003)
    for g in b.GROUPS + ["total"]:
        assert new_out[g] == pytest.approx(old_out[g]), g
    assert all(old_out[r] == 0.0 for r in b.PART_ROWS if r.startswith(("timing rest:", "reference rest:")))
