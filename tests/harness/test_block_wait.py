"""The trusted reference worker's run-queue wait, read once a block (harness/timed.py
``worker_wait_ms``) instead of around each call: every thread of that worker is one
schedstat file each (about 0.5 ms a read for 40 threads on a 2-core host), and between its
calls the worker runs nothing (stopped on the CPU, waiting for the next request on CUDA), so
the wait from a block's start to its end is the wait inside its windows. The load check of
the paired-block rule (harness/resolution.py, item 3) must still see it."""

from __future__ import annotations

import pytest

from solbench.harness import EvalConfig, evaluate, timed
from solbench.harness.resolution import LOAD_WAIT_SHARE, SideEvidence, pair_resolution
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status

from harness_helpers import relu_problem

SPAN_C, SPAN_R, RT = [0.100] * 8, [0.150] * 8, [1.0] * 8


def _pair(ref_block_wait, is_cuda=True):
    return pair_resolution(SideEvidence(SPAN_C, [4, 4], wait_ms=[0.01] * 8, window_ms=RT),
                           SideEvidence(SPAN_R, [4, 4], wait_ms=[0.02] * 8, window_ms=RT,
                                        block_wait_ms=ref_block_wait), is_cuda=is_cuda)


def test_block_waits_count_in_the_share_by_hand():
    # per call 0.02 ms (the parent's threads) x 8 = 0.16, plus the worker's 2 x 2.0 ms,
    # over 8 windows of 1 ms: 4.16 / 8 = 52%, above the 10% line
    busy = _pair([2.0, 2.0])
    assert busy["load_wait_share"]["reference"] == pytest.approx(4.16 / 8)
    assert not busy["resolved"] and "reference waited for a CPU 52% of its round trips" in busy["reason"]
    # 0.16 + 2 x 0.02 = 0.2 ms of 8: 2.5%, a quiet host
    quiet = _pair([0.02, 0.02])
    assert quiet["load_wait_share"]["reference"] == pytest.approx(0.2 / 8) and quiet["resolved"]
    # the candidate's side has none: its waits are all per call
    assert quiet["load_wait_share"]["candidate"] == pytest.approx(0.08 / 8)


@pytest.mark.parametrize("blocks", [[None, 0.1], []])
def test_an_unknown_block_wait_makes_the_share_unknown(blocks):
    r = _pair(blocks)
    assert r["load_wait_share"]["reference"] is None
    # on the CPU a load that cannot be known refuses the claim (on CUDA it refuses nothing)
    cpu = _pair(blocks, is_cuda=False)
    assert not cpu["resolved"] and "host load unknown" in cpu["reason"]


def test_the_reference_worker_is_read_once_at_each_block_start_and_end(tmp_path, monkeypatch):
    """A real CPU evaluation, the reference against itself, with the block read replaced by
    one whose value grows 50 ms at every read: the rule sees each reference block wait 50 ms
    (far above 10% of a relu's windows) and refuses the claim naming the reference, and the
    worker was read twice per reference block, not around each of its calls."""
    prob = relu_problem(tmp_path, name="relu_bw", uuid="w0")
    reads: list[int] = []

    def growing(pid):
        reads.append(pid)
        return 50.0 * len(reads)

    monkeypatch.setattr(timed, "worker_wait_ms", growing)
    (t,) = evaluate(prob, reference_solution(prob), EvalConfig(device="cpu", rounds=1))
    ev = t.evaluation
    assert ev.status == Status.PASSED, ev.log
    r = ev.speedup_resolution
    assert r is not None and not r["resolved"]
    share = r["load_wait_share"]["reference"]
    assert share is not None and share > LOAD_WAIT_SHARE, r
    assert "reference waited for a CPU" in r["reason"], r
    n_ref_calls = len(ev.reference_timing.samples_ms) if ev.reference_timing else 0
    n_blocks = len(reads) // 2
    assert len(reads) % 2 == 0 and 2 <= n_blocks < n_ref_calls, (len(reads), n_ref_calls)
    assert len(set(reads)) == 1  # the reference's worker only, never the candidate's
