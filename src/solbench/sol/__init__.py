"""Speed-of-light analysis: op counting, hardware specs, the bound, calibration, SOL score.

Public API:
    bound(problem, workload, hardware="H200", model="refined") -> SolBound
    sol_score(t_k_ms, t_b_ms, t_sol_ms) -> ScoreResult
    classify_against_sol(measured_ms, t_sol_ms, t_certain_ms) -> None | "advisory" | "hack"
    load_hardware(name_or_path) -> HardwareSpec
    hardware_for_device_name(torch_device_name) -> spec id | None
    calibrated_spec(base, measured, host=, date=) -> HardwareSpec (usable by bound())

Imports solbench.spec (and optionally solbench.inputs) only, never solbench.harness.
``CountingError`` and ``count_workload`` are loaded on first use: they bring torch, which pricing
and cached counts do not need.
"""

from .bound import SolBound, bound, bound_from_counts, certain_ms, mma_rate
from .classify import classify_against_sol, sol_finding
from .counts import Counts
from .hwspec import (
    HardwareError, HardwareSpec, calibrated_spec, hardware_for_device_name, list_hardware,
    load_hardware, spec_to_toml,
)
from .score import ScoreResult, sol_score

__all__ = [
    "SolBound", "bound", "bound_from_counts", "CountingError", "Counts", "count_workload",
    "HardwareError", "HardwareSpec", "calibrated_spec", "hardware_for_device_name",
    "list_hardware", "load_hardware", "spec_to_toml", "ScoreResult", "sol_score",
    "certain_ms", "mma_rate", "classify_against_sol", "sol_finding",
]


def __getattr__(name: str):
    if name in ("CountingError", "count_workload"):
        from . import counting

        return getattr(counting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
