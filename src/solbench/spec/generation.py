"""The model configuration a generated solution carries in its name (``solbench generate``).

A generated candidate's label (its file stem, hence the solution name its traces carry) is

    <model>@T<temperature>.s<sample>.t<turn>

e.g. ``gpt-4o@T0.7.s0.t1``, ``meta-llama~Llama-3.1-8B@Tdefault.s2.t3``. ``<model>`` is the
model name made safe for a file name and reversibly (:func:`model_slug`): ``/`` becomes ``~``,
every other character outside ``[A-Za-z0-9._-]`` is percent-encoded. ``T`` is the sampling
temperature as sent (``default``: none sent), ``s`` the sample index from 0, ``t`` the
turn of iterative refinement from 1. So every trace of a generated candidate names the model
configuration that wrote it, and ``solbench report`` groups by it (report/models.py) without
any side file. docs/study.md describes the layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

_LABEL = re.compile(r"^(?P<model>.+)@T(?P<temp>default|[0-9]+(?:\.[0-9]+)?)"
                    r"\.s(?P<sample>[0-9]+)\.t(?P<turn>[0-9]+)$")


def model_slug(model: str) -> str:
    """``model`` as a file-name-safe string; :func:`model_from_slug` inverts it."""
    s = quote(model, safe="")  # keeps A-Z a-z 0-9 _ . - ~
    return s.replace("~", "%7E").replace("%2F", "~")


def model_from_slug(slug: str) -> str:
    return unquote(slug.replace("~", "%2F"))


@dataclass(frozen=True)
class ModelConfig:
    """Who wrote a generated candidate: the model (as named to its endpoint, or the agent
    command's name), the sampling temperature (None: the endpoint's default), the sample index
    (0-based) and the refinement turn (1-based)."""

    model: str
    temperature: float | None
    sample: int = 0
    turn: int = 1

    @property
    def temperature_text(self) -> str:
        return "default" if self.temperature is None else f"{self.temperature:g}"

    def label(self) -> str:
        """The candidate label (module docstring). Raises ValueError for a negative sample,
        a turn below 1 or a temperature outside [0, 2] (the OpenAI API's range)."""
        if self.sample < 0 or self.turn < 1:
            raise ValueError(f"sample must be >= 0 and turn >= 1, got {self.sample}, {self.turn}")
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature {self.temperature} is outside [0, 2]")
        if not self.model:
            raise ValueError("model name is empty")
        return f"{model_slug(self.model)}@T{self.temperature_text}.s{self.sample}.t{self.turn}"

    @property
    def group(self) -> str:
        """The configuration without the sample index: ``model @ T, turn`` (one table row)."""
        return f"{self.model} T={self.temperature_text} turn {self.turn}"


def parse_label(label: str) -> ModelConfig | None:
    """The configuration a generated candidate's label names, or None for any other label
    (``eager``, ``triton``, a hand-written candidate)."""
    m = _LABEL.match(label)
    if m is None:
        return None
    t = m["temp"]
    return ModelConfig(model=model_from_slug(m["model"]),
                       temperature=None if t == "default" else float(t),
                       sample=int(m["sample"]), turn=int(m["turn"]))
