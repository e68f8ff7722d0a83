"""GPU telemetry through NVML (nvidia-ml-py): clocks, throttle reasons, temperature, power.

Recorded around each workload's timed phase; a measurement taken while a clock-throttle
reason other than idle / application-clock setting was active is flagged (nvbench practice;
docs/hardware.md, "Clock policy": we never lock clocks, we record them).
"""

from __future__ import annotations

from typing import Any

_THROTTLE_NAMES = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
BENIGN = {"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"}


def _cuda_uuid(index: int) -> str | None:
    """NVML-style UUID (``GPU-...``) CUDA reports for its device ``index``; None if unknown."""
    try:
        import torch

        u = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:  # noqa: BLE001
        return None
    if u is None:
        return None
    u = str(u)
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


class Telemetry:
    """NVML reader for one CUDA device index; every method degrades to ``{}`` without NVML.

    The NVML device is found by the UUID CUDA reports for ``index``: NVML numbers every GPU
    of the machine in PCI order and ignores CUDA_VISIBLE_DEVICES, so under
    ``CUDA_VISIBLE_DEVICES=1`` (one process per GPU, or a Ray GPU worker) CUDA's device 0 is
    NVML's device 1. Falls back to NVML index ``index`` when CUDA gives no UUID."""

    def __init__(self, index: int = 0):
        self.ok = False
        self._max_sm: int | None = None
        #: why NVML could not be read (None when it can)
        self.reason: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            uuid = _cuda_uuid(index)
            self._h = (pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid
                       else pynvml.nvmlDeviceGetHandleByIndex(index))
            self.ok = True
        except Exception as e:  # noqa: BLE001 - no NVML (CPU machine, container without driver)
            self._nv = None
            self.reason = f"NVML unavailable: {type(e).__name__}: {e}"[:200]

    def _max_sm_clock(self) -> int:
        """The device's maximum SM clock (MHz), read once: a fixed property of the board
        (``nvmlDeviceGetMaxClockInfo``), and its slowest query by far (about 1.9 ms a call on an
        H100 host, most of a reading's time in a py-spy profile: docs/throughput.md, "Two
        parent-side reads that repeated themselves"), on the parent's path between timed calls."""
        if self._max_sm is None:
            self._max_sm = self._nv.nvmlDeviceGetMaxClockInfo(self._h, self._nv.NVML_CLOCK_SM)
        return self._max_sm

    def sample(self) -> dict[str, Any]:
        """One reading: sm/mem clock (MHz), max sm clock, throttle reasons, temp (C), power (W)."""
        if not self.ok:
            return {}
        nv, h = self._nv, self._h
        out: dict[str, Any] = {}
        for key, fn in (
            ("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            ("max_sm_clock_mhz", self._max_sm_clock),
            ("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
        ):
            try:
                out[key] = fn()
            except Exception:  # noqa: BLE001
                pass
        try:
            mask = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
        except Exception:  # noqa: BLE001
            try:
                mask = nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
            except Exception:  # noqa: BLE001
                mask = None
        if mask is not None:
            out["throttle_reasons"] = [n for b, n in _THROTTLE_NAMES.items() if mask & b]
        return out

    def name(self) -> str | None:
        if not self.ok:
            return None
        n = self._nv.nvmlDeviceGetName(self._h)
        return n.decode() if isinstance(n, bytes) else n


def throttled(samples: list[dict[str, Any]]) -> list[str]:
    """Non-benign throttle reasons seen in any sample."""
    seen: set[str] = set()
    for s in samples:
        seen.update(r for r in s.get("throttle_reasons", []) if r not in BENIGN)
    return sorted(seen)


#: where the clock samples of a trace's ``telemetry.clocks`` are read
CLOCKS_WHERE = ("NVML, read by the parent (never the worker) after the first and the last timed call of "
                "each timed block of either side, and before and after the whole timed phase")


def clock_summary(samples: list[dict[str, Any]], reason: str | None = None) -> dict[str, Any]:
    """``telemetry.clocks`` of a trace: the SM and memory clocks (MHz) seen in ``samples``
    (:meth:`Telemetry.sample` readings) as ``{"min", "median", "max"}`` each, every throttle /
    clock-event reason seen (``throttle_reasons``, benign ones included) and the non-benign
    ones (``throttled``), the number of readings and where they were taken. With no reading
    (the CPU, or NVML unavailable) every figure is None and ``reason`` says why; so a reader
    can compare with a leaderboard run at locked clocks (SOL-ExecBench locks the B200 at 1500
    MHz; we never lock clocks, we record them: docs/hardware.md, "Clock policy")."""
    import statistics

    def span(key: str) -> dict[str, float] | None:
        xs = [float(x[key]) for x in samples if isinstance(x.get(key), (int, float))]
        return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)} if xs else None

    sm, mem = span("sm_clock_mhz"), span("mem_clock_mhz")
    seen = sorted({r for x in samples for r in x.get("throttle_reasons", [])}) \
        if any("throttle_reasons" in x for x in samples) else None
    if sm is None and mem is None and reason is None:
        reason = "no NVML clock reading was taken"
    return {"sm_clock_mhz": sm, "mem_clock_mhz": mem, "throttle_reasons": seen,
            "throttled": throttled(samples) if seen is not None else None,
            "max_sm_clock_mhz": span("max_sm_clock_mhz"),
            "n_samples": sum(1 for x in samples if x), "where": CLOCKS_WHERE if sm or mem else None,
            "reason": None if (sm or mem) else reason}
