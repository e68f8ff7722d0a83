"""Request and response bodies of the service (pydantic v2); docs/serve.md documents them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config import DEFAULTS, Device, Iters, Rounds, Seconds, Seed

#: what a job can be in: queued -> running -> done | failed; queued -> cancelled
JobState = Literal["queued", "running", "done", "failed", "cancelled"]


class EvalRequest(BaseModel):
    """One evaluation: the options of ``solbench eval`` as fields.

    ``problem``: a problem directory or KernelBench ``.py`` under one of the server's allowed
    roots, or a bundled problem (``l1/relu_fp32``). ``solution``: a solution as
    ``solution.json`` holds it (a candidate ``.py`` is turned into one by the client,
    :func:`solbench.spec.load_solution`); null evaluates the reference itself.
    ``workloads``: workload uuids (null: all). The settings and their bounds are
    :class:`solbench.config.EvalConfig`'s (the same types): ``first_call_timeout_s`` bounds a workload's first
    call, ``call_timeout_s`` every later one (null: 50x the reference's time, at least 10 s).
    ``client``: names the submitter for the fair queue (FIFO per client, round-robin across
    clients)."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, max_length=4096)
    solution: dict[str, Any] | None = None
    workloads: list[str] | None = Field(default=None, max_length=100_000)
    device: Device | None = None
    rounds: Rounds = DEFAULTS.rounds
    iters: Iters | None = None
    timing: bool = True
    seed: Seed | None = None
    first_call_timeout_s: Seconds | None = None
    call_timeout_s: Seconds | None = None
    build_timeout_s: Seconds | None = None
    keep_going: bool = False
    hardware: str | None = Field(default=None, max_length=4096)
    sol_model: Literal["refined", "solar"] = "refined"
    client: str = Field(default="default", min_length=1, max_length=128)


class JobView(BaseModel):
    """A job as ``GET /v1/jobs/{id}`` returns it. ``traces``: the finished traces from index
    ``after`` on (each a trace as ``solbench eval --json`` prints it); ``n_traces``: how many
    are finished in all; ``stages``: lines the evaluation said before its first workload
    (SOL counting); ``position``: jobs of this device that run before it (queued only);
    ``error``: why a job failed (a bad request found when it ran, or a server fault: never a
    candidate's behaviour, which is a trace status)."""

    id: str
    client: str
    state: JobState
    problem: str
    solution: str
    device: str
    position: int | None = None
    n_traces: int = 0
    traces: list[dict[str, Any]] = []
    stages: list[str] = []
    error: str | None = None
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
