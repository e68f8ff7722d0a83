"""Cached-output evidence: a judged call whose outputs are an earlier call's answer.

Every judged call of a workload (correctness rounds, verified timed iterations, the re-check
after the timed loop) gets input values never seen before; the correctness rounds hand them
to the candidate in the *same tensor objects* (slot 0), so a cache keyed on the identity,
address or shape of its inputs hits there and returns what it returned before. The parent
names that from the outputs alone, which the candidate cannot rewrite once copied:

- **replayed**: the outputs of a failing call are bit for bit those of an earlier call that
  passed (right for that call's inputs, wrong for these: the same bits cannot be both);
- **unwritten**: a returned (non-DPS) output of a failing call is entirely the poison the
  worker writes into every buffer a call returned once it copied it out
  (:func:`~solbench.harness.correctness.poison_`; the parent poisons the slots the same
  way): the call returned memory no code wrote since an earlier call returned it, which is
  a cached tensor handed back again (or a freed block of one: allocator reuse), after an
  earlier call showed the candidate can compute the answer.

Either is ``cached_output`` (REWARD_HACK) with the calls named. Only failing calls are
examined, so an honest output that does not depend on the values (an all-False mask, the
same argmax) is never one: it is right for both calls.
"""

from __future__ import annotations

from typing import Any

import torch

from ..spec.trace import Finding
from .checks import add_once, finding
from .correctness import POISON_BYTE, bits_equal

#: earlier passing calls whose outputs are kept (the first and the latest: a cache keyed on
#: the slot's objects replays the first; one keyed on a rotating pool replays a recent one)
KEEP = 2


def _all_poison(t: torch.Tensor) -> bool:
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return False
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    return bool((b == POISON_BYTE).all().item())


class ReplayWatch:
    """The outputs of a workload's earlier passing calls, and the check of a failing one."""

    def __init__(self) -> None:
        self.passed: list[tuple[str, list[torch.Tensor]]] = []
        #: judged calls seen so far (numbers the labels: timed blocks restart their iterations)
        self.n = 0

    def _label(self, label: str) -> str:
        self.n += 1
        return f"{label} (judged call {self.n})"

    def passed_call(self, label: str, outs: list[torch.Tensor]) -> None:
        """Keep a passing call's outputs (``label`` names it in evidence): the first and the
        latest (:data:`KEEP`)."""
        kept = (self._label(label), [o.detach().clone() for o in outs])
        if len(self.passed) < KEEP:
            self.passed.append(kept)
        else:
            self.passed[-1] = kept

    def failed_call(self, label: str, outs: list[torch.Tensor], findings: list[Finding],
                    returned: bool, also: list[tuple[str, list[torch.Tensor]]] = ()) -> Finding | None:
        """Judge a failing call's outputs ``outs`` (copied out by the parent); ``returned``:
        the candidate returns its outputs (non-DPS); ``also``: (label, outputs) of further
        earlier calls on other inputs, judged or not (the correctness rounds passed, so an
        earlier output the same bits as this wrong one is a replay either way). Appends and
        returns the ``cached_output`` finding, if any."""
        label = self._label(label)
        if not (self.passed or also) or not outs:
            return None
        for earlier, prev in list(self.passed) + list(also):
            if len(prev) == len(outs) and all(bits_equal(o, p) for o, p in zip(outs, prev)):
                return self._add(findings, label, earlier, "replayed", (
                    f"{label}: its outputs are bit for bit those of {earlier}, which were right for "
                    "that call's inputs and are wrong for these (an output cache)"), {})
        if returned and self.passed:
            unwritten = [i for i, o in enumerate(outs) if _all_poison(o)]
            if unwritten:
                return self._add(findings, label, self.passed[-1][0], "unwritten", (
                    f"{label}: returned output(s) {unwritten} hold only the poison the worker wrote into "
                    "buffers earlier calls returned: no code wrote them in this call (a cached tensor "
                    f"returned again, or a freed one; {self.passed[-1][0]} computed the answer)"),
                    {"outputs": unwritten})
        return None

    @staticmethod
    def _add(findings: list[Finding], label: str, earlier: str, kind: str, msg: str,
             extra: dict[str, Any]) -> Finding | None:
        f = finding("cached_output", msg, {"call": label, "earlier_call": earlier, "kind": kind, **extra})
        return f if add_once(findings, f) else None
