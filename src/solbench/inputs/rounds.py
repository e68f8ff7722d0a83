"""The input sets of a workload's correctness rounds, as data (docs/inputs.md, "Rounds").

:func:`round_plan` lists them: ``rounds`` upstream sets, then a strict set and the stress
sets where :func:`solbench.inputs.differing_profiles` says their values differ. The harness
runs them (:mod:`solbench.harness.rounds`: order, judging); the integrity screen judges the
reference alone on the stress sets (:mod:`solbench.integrity.screen`). It depends on input
generation only, so both read it without the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..spec.problem import Problem
from .generate import differing_profiles, make_inputs
from .opclass import op_classes


@dataclass(frozen=True)
class RoundSpec:
    """One correctness round: input set ``index`` (names its seed under ``--seed``) of input
    ``profile`` ("upstream", "strict", "stress"), made by
    ``generate(problem, workload, seed, device, profile=profile) -> {name: value}``;
    ``label`` names the round in verdicts ("upstream", "strict", "stress:softmax", ...)."""

    index: int
    label: str = "upstream"
    generate: Callable[..., dict] = make_inputs
    profile: str = "upstream"


#: input-set index of the strict and stress rounds (their seeds under ``--seed``); the
#: upstream rounds are 0..rounds-1, the timed sets 1001 on
STRICT_SET, STRESS_SET, SPARSE_SET = 500, 501, 502


def round_plan(rounds: int, problem: Problem | None = None, workload=None,
               extra: bool = True) -> list[RoundSpec]:
    """The plan of one workload (module doc): ``rounds`` upstream rounds, then a strict and
    a stress round where :func:`solbench.inputs.differing_profiles` lists them for
    ``workload`` of ``problem`` (both given, ``extra`` true). Raises ValueError for
    ``rounds < 1``, SpecError from the input rules (an unknown role)."""
    if rounds < 1:
        raise ValueError(f"rounds: must be >= 1 (got {rounds}): a verdict needs a judged round")
    plan = [RoundSpec(r) for r in range(rounds)]
    if not extra or problem is None or workload is None:
        return plan
    profiles = differing_profiles(problem, workload)
    if "strict" in profiles:
        plan.append(RoundSpec(STRICT_SET, "strict", profile="strict"))
    cls = op_classes(problem.definition).name
    if "stress" in profiles:
        plan.append(RoundSpec(STRESS_SET, f"stress:{cls}", profile="stress"))
    if "stress_sparse" in profiles:
        plan.append(RoundSpec(SPARSE_SET, f"stress_sparse:{cls}", profile="stress_sparse"))
    return plan
