"""Executors of ``solbench run``, now :mod:`solbench.run.executors` (local and Ray behind one
interface); these names stay importable from here."""

from __future__ import annotations

from ..run.executors import (EXECUTORS, EvalWorker, LocalExecutor, OnPairDone, RayExecutor, RunOutcome,
                             _torch_uuid, canonical_key, device_identity, make_executor, nvml_uuid,
                             visible_devices)

__all__ = ["EXECUTORS", "EvalWorker", "LocalExecutor", "OnPairDone", "RayExecutor", "RunOutcome",
           "canonical_key", "device_identity", "make_executor", "nvml_uuid", "visible_devices"]
