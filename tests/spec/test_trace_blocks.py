"""The typed trace blocks (``SolBlock``, ``ExecutorStamp``): one SOL shape, old traces load.

The fixture holds two real lines written before the blocks were typed (an H200 suite run of
bench/results/device_s11/thru/local_run: a PASSED trace whose SOL block carried T_SOL twice,
as ``sol_ms`` and ``t_sol_ms``, and a RUNTIME_ERROR trace without one; both stamped by the
local executor)."""

import json
from pathlib import Path

import pytest

from solbench.spec.trace import ExecutorStamp, SolBlock, Trace
from solbench.store.blocks import sol_of

FIXTURE = Path(__file__).parent / "fixtures" / "traces_before_typed_blocks.jsonl"


def _lines():
    return FIXTURE.read_text().splitlines()


def test_old_lines_load_with_one_t_sol():
    raw = json.loads(_lines()[0])
    old_sol = raw["evaluation"]["sol"]
    assert old_sol["sol_ms"] == old_sol["t_sol_ms"] == pytest.approx(0.000114667, rel=1e-5)
    t = Trace.from_json_line(_lines()[0])
    sol = t.evaluation.sol
    assert isinstance(sol, SolBlock) and sol_of(t) is sol
    assert sol.sol_ms == pytest.approx(0.000114667, rel=1e-5) and sol.model == "refined"
    assert sol.bound.bottleneck == "dram" and sol.bound.total_flops == 3145728.0
    # S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) with T_k 0.0049755, T_b 0.004928 ms
    assert sol.score == pytest.approx(1 / (1 + (0.0049755 - sol.sol_ms) / (0.004928 - sol.sol_ms)))
    assert sol.h == pytest.approx((0.004928 - 0.0049755) / (0.004928 - sol.sol_ms))
    ex = t.evaluation.executor
    assert isinstance(ex, ExecutorStamp)
    assert (ex.name, ex.worker, ex.attempt, ex.retried, ex.seq) == ("local", "local", 1, False, 1)
    assert ex.gpu_uuid == "GPU-92f54ff9-0d56-3e9b-03dd-899e7311fdbc"
    # written back: the same block less the duplicate t_sol_ms, nothing added
    again = json.loads(t.to_json_line())["evaluation"]
    assert again["sol"] == {k: v for k, v in old_sol.items() if k != "t_sol_ms"}
    assert again["executor"] == raw["evaluation"]["executor"]
    assert Trace.from_json_line(t.to_json_line()) == t


def test_failed_trace_without_sol_round_trips():
    raw = json.loads(_lines()[1])
    t = Trace.from_json_line(_lines()[1])
    assert t.evaluation.status.value == "RUNTIME_ERROR" and t.evaluation.sol is None
    again = json.loads(t.to_json_line())["evaluation"]
    # every key it had comes back unchanged (later fields are added as null)
    assert {k: again[k] for k in raw["evaluation"]} == raw["evaluation"]


def test_t_sol_only_block_and_error_block():
    # the shape the removed sol.bound.sol_block helper wrote: T_SOL only as t_sol_ms
    b = SolBlock.model_validate({"t_sol_ms": 0.25, "model": "solar", "hardware": "B200"})
    assert b.sol_ms == 0.25 and b.model_dump(mode="json") == {"sol_ms": 0.25, "model": "solar",
                                                              "hardware": "B200"}
    err = SolBlock.model_validate({"hardware": "H200", "model": "refined", "error": "CountFailed: x"})
    assert err.model_dump(mode="json") == {"hardware": "H200", "model": "refined", "error": "CountFailed: x"}
    with pytest.raises(ValueError, match="score"):
        SolBlock.model_validate({"score": "fast"})
