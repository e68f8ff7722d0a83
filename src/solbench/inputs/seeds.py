"""Seeds of the input sets (threats.md principle 2: no stored secret predicts a future input).

Default: each input set's seed is drawn from the OS's random source (:mod:`secrets`) at the
moment that set is made, so no value held by the parent before then (which a candidate with
the parent's memory in reach could read) determines it. With a base seed (``--seed``), set r
of workload j uses ``sha256(base:j:r)`` (63 bits), so a run is reproduced exactly. Either
way every seed used is recorded, in order, and goes into the trace after the evaluation:
a set's seed rebuilds that set and predicts no other (sha256 is one-way).

The base seed itself is the run's secret: it never leaves the parent (workers get values,
never seeds; the manifest's command line and config carry :func:`fingerprint` in its
place) and a trace records only its fingerprint (``input_seed``), so a candidate that
reads the results file during the run (the sandbox hides it: docs/isolation.md; this is
the second line) learns nothing that derives a later workload's inputs. ``--seed BASE``
replays the run; the fingerprint tells which base a trace came from. A base a candidate can
guess (0, 7, a date) is no secret whatever is written: its own inputs are an oracle for a
guess. Use a random one (``--seed $(python -c 'import secrets; print(secrets.randbits(63))')``).
"""

from __future__ import annotations

import hashlib
import secrets


def derived_seed(base: int, j: int, r: int) -> int:
    """Seed of workload j's input set r under base seed ``base``: sha256 of "base:j:r", 63 bits."""
    h = hashlib.sha256(f"{base}:{j}:{r}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def fingerprint(base: int) -> str:
    """What a trace and the manifest record of base seed ``base``: ``"sha256:"`` + 16 hex
    digits of sha256("solbench-base-seed:<base>"). Tells which base produced a trace (two
    traces of one run share it) and checks a base given to ``--seed``; derives no input."""
    return "sha256:" + hashlib.sha256(f"solbench-base-seed:{base}".encode()).hexdigest()[:16]


class InputSeeds:
    """Seeds of one workload's input sets, drawn (or derived) one set at a time."""

    def __init__(self, base: int | None, j: int):
        self.base = base
        self.j = j
        self.used: list[int] = []

    def next(self, r: int) -> int:
        """The seed of input set ``r`` (``r`` names the set under a base seed; without one
        the seed is fresh OS randomness whatever ``r`` is)."""
        s = derived_seed(self.base, self.j, r) if self.base is not None else secrets.randbits(63)
        self.used.append(s)
        return s

    def record(self) -> list[str]:
        return [format(s, "x") for s in self.used]
