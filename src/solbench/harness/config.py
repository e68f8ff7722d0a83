"""The choices made from the evaluation settings before any worker starts: the workload
selection, the environment record. The settings themselves, :class:`EvalConfig`, are
:mod:`solbench.config` (bounded, frozen), named here too for the harness's callers."""

from __future__ import annotations

import platform

import torch

from ..config import EvalConfig
from ..errors import SpecError
from ..spec.problem import Problem
from ..spec.trace import Environment
from ..spec.workload import Workload

__all__ = ["EvalConfig", "environment", "select_workloads"]


def environment(device: str) -> Environment:
    libs = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton  # noqa: F401

        libs["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        libs["cuda"] = str(torch.version.cuda)
        hw = torch.cuda.get_device_name(torch.device(device))
    else:
        from ..proc.procfs import cpu_model

        # platform.processor() is empty on Linux: the model comes from /proc/cpuinfo
        hw = f"CPU {platform.machine()} ({cpu_model() or platform.processor() or 'unknown'})"
    from .sandbox import sandbox_status

    st = sandbox_status(device)
    box = {"mode": st["mode"], "namespaces": st["namespaces"], "seccomp": st["seccomp"],
           "warning": st["warning"], "tasks": st["tasks"], "memory": st["memory"]}
    return Environment(hardware=hw, libs=libs, sandbox=box)


def select_workloads(problem: Problem, cfg: EvalConfig) -> list[Workload]:
    ws = problem.workloads
    if cfg.workloads:
        out = []
        for key in cfg.workloads:
            if key.isdigit() and int(key) < len(ws):
                out.append(ws[int(key)])
                continue
            hits = [w for w in ws if w.uuid == key] or [w for w in ws if w.uuid.startswith(key)]
            if len(hits) != 1:
                raise SpecError(problem.path, "workloads",
                                f"{key!r} matches {len(hits)} workloads (need exactly one)")
            out.append(hits[0])
        ws = out
    if cfg.max_workloads is not None:
        ws = ws[: cfg.max_workloads]
    return ws
