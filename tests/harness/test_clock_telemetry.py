"""Every trace records the clocks its timed calls ran at (issue 31 goal 4): the SM and memory
clocks and any throttle reasons, read through NVML by the parent after the first and the last
call of each timed block; on the CPU the figures are null with the reason. NVML is a fake
module with pynvml's API here (no GPU on CI)."""

from __future__ import annotations

import sys
import types

import pytest

from solbench.harness import EvalConfig
from solbench.harness.evaluator import Evaluator
from solbench.harness.telemetry import Telemetry, clock_summary
from solbench.spec.problem import reference_solution
from solbench.spec.trace import Status
from solbench.store.blocks import telemetry_of

from harness_helpers import relu_problem


def fake_pynvml(sm=(1980, 1755), mem=2619, reasons=0x1 | 0x4, fail_init=False):
    """A module with pynvml's names: SM clock readings cycle through ``sm`` (MHz), memory
    clock ``mem``; ``nvmlDeviceGetCurrentClocksEventReasons`` returns ``reasons`` (0x1 gpu_idle,
    0x4 sw_power_cap); counts its calls."""
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 1, 2, 0
    m.calls = {"sm": 0}

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def clock(h, kind):
        if kind == m.NVML_CLOCK_SM:
            m.calls["sm"] += 1
            return sm[(m.calls["sm"] - 1) % len(sm)]
        return mem

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByUUID = m.nvmlDeviceGetHandleByIndex = lambda x: "h0"
    m.nvmlDeviceGetClockInfo = clock
    def max_clock(h, kind):
        m.calls["max"] = m.calls.get("max", 0) + 1
        return 1980

    m.nvmlDeviceGetMaxClockInfo = max_clock
    m.nvmlDeviceGetTemperature = lambda h, kind: 41
    m.nvmlDeviceGetPowerUsage = lambda h: 123000
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    return m


def test_clock_summary_by_hand():
    s = [{"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "throttle_reasons": ["gpu_idle"]},
         {"sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "throttle_reasons": ["sw_power_cap"]},
         {"sm_clock_mhz": 1500, "mem_clock_mhz": 2619, "throttle_reasons": []}]
    c = clock_summary(s)
    assert c["sm_clock_mhz"] == {"min": 1500.0, "median": 1755.0, "max": 1980.0}
    assert c["mem_clock_mhz"] == {"min": 2619.0, "median": 2619.0, "max": 2619.0}
    assert c["throttle_reasons"] == ["gpu_idle", "sw_power_cap"] and c["throttled"] == ["sw_power_cap"]
    assert c["n_samples"] == 3 and c["reason"] is None and "parent" in c["where"]
    none = clock_summary([], "CPU device: no GPU clocks")
    assert none["sm_clock_mhz"] is None and none["mem_clock_mhz"] is None and none["throttle_reasons"] is None
    assert none["reason"] == "CPU device: no GPU clocks" and none["n_samples"] == 0


def test_nvml_reader_with_a_fake_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    t = Telemetry(0)
    assert t.ok and t.reason is None
    s = t.sample()
    assert s["sm_clock_mhz"] == 1980 and s["mem_clock_mhz"] == 2619 and s["power_w"] == 123.0
    assert s["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    # older drivers: only the ThrottleReasons name
    m = fake_pynvml(reasons=0x40)
    del m.nvmlDeviceGetCurrentClocksEventReasons
    m.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x40
    monkeypatch.setitem(sys.modules, "pynvml", m)
    assert Telemetry(0).sample()["throttle_reasons"] == ["hw_thermal_slowdown"]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    t = Telemetry(0)
    assert not t.ok and t.reason == "NVML unavailable: RuntimeError: NVML Shared Library Not Found"


def test_the_max_clock_is_read_once_and_reported_in_every_sample(monkeypatch):
    """The board's maximum SM clock is fixed; its NVML query is the slow one, on the parent's
    path between timed calls: read once per reader, still in every reading."""
    m = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", m)
    t = Telemetry(0)
    samples = [t.sample() for _ in range(5)]
    assert [s["max_sm_clock_mhz"] for s in samples] == [1980] * 5
    assert m.calls["max"] == 1 and m.calls["sm"] == 5  # the current clock is read every time


def _evaluate(tmp_path, telemetry=None):
    prob = relu_problem(tmp_path, sizes=(4096,))
    ev = Evaluator(prob, EvalConfig(device="cpu", rounds=1, iters=8, blocks=2))
    if telemetry is not None:
        ev.telemetry = telemetry  # what the evaluator builds on CUDA, with the fake NVML behind it
    try:
        (t,) = ev.evaluate(reference_solution(prob))
    finally:
        ev.close()
    assert t.evaluation.status == Status.PASSED, t.evaluation.log
    return t


def test_cpu_trace_says_null_with_the_reason(tmp_path):
    c = telemetry_of(_evaluate(tmp_path)).clocks
    assert c["sm_clock_mhz"] is None and c["mem_clock_mhz"] is None and c["throttle_reasons"] is None
    assert c["reason"] == "CPU device: no GPU clocks"


def test_every_timed_block_is_read_by_the_parent(tmp_path, monkeypatch):
    """8 calls per side in 2 blocks of 4 each side: a reading after the first and the last call
    of each of the 4 blocks (8) and one before and after the timed phase (2): 10 readings, the
    SM clock alternating 1980 / 1755 MHz; sw_power_cap is reported as throttling."""
    m = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", m)
    t = _evaluate(tmp_path, Telemetry(0))
    tel = telemetry_of(t)
    c = tel.clocks
    assert c["n_samples"] == 10 and m.calls["sm"] == 10
    assert c["sm_clock_mhz"] == {"min": 1755.0, "median": pytest.approx((1755 + 1980) / 2), "max": 1980.0}
    assert c["mem_clock_mhz"]["max"] == 2619.0 and c["throttled"] == ["sw_power_cap"]
    assert any(f.check == "throttled" for f in t.evaluation.findings)
