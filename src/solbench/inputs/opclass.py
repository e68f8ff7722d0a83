"""Op class of a definition, for choosing the stress distribution (pure, text only).

The class is read from the definition's own words: ``op_type``, ``name``, ``description``
and the reference's source (the torch calls it makes). A definition can be in several
classes (a decoder layer normalises and attends); :func:`op_classes` returns all that match,
with the evidence, and the stress generator applies the first in :data:`PRIORITY`.

- ``softmax``: the reference calls ``softmax`` / ``log_softmax`` / ``logsumexp`` /
  ``cross_entropy`` / ``scaled_dot_product_attention`` (as a word: ``F.softmax``,
  ``torch.softmax``, ``x.softmax``), or ``op_type`` is ``sampling``. Stress: extreme logits
  (a random subset of rows offset by +-100..1000, spikes in the others) with near-ties.
- ``norm``: the reference calls ``layer_norm`` / ``rms_norm`` / ``group_norm`` /
  ``batch_norm`` / ``instance_norm`` / ``rsqrt`` / ``var`` / ``var_mean`` / ``normalize``,
  or the name or description says layernorm / rmsnorm / groupnorm / batchnorm. Stress: large offsets of a random subset of rows against a small
  spread (catastrophic cancellation in a one-pass E[x^2] - E[x]^2 variance), constant rows
  (variance 0).
- ``generic``: anything else. Stress: magnitudes spread over 10^-3 to 10^2, random signs and
  exact zeros.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..spec.definition import Definition

PRIORITY = ("softmax", "norm", "generic")

#: torch calls (in the reference's source) that normalise an exponential over a row
_SOFTMAX = re.compile(r"\b(softmax|log_softmax|logsumexp|cross_entropy|scaled_dot_product_attention)\b")
#: torch calls (in the reference's source) and words (in the name or description) of a
#: mean/variance normalisation
_NORM = re.compile(r"\b(layer_norm|rms_norm|group_norm|batch_norm|instance_norm|rsqrt|var|var_mean|"
                   r"normalize|layernorm|rmsnorm|groupnorm|batchnorm)\b", re.I)


@dataclass(frozen=True)
class OpClass:
    """``name``: the class the stress round uses; ``all``: every class that matched;
    ``evidence``: class -> the text that matched (for the report)."""

    name: str
    all: tuple[str, ...]
    evidence: dict[str, str]


def op_classes(defn: Definition) -> OpClass:
    """Classify ``defn`` by its op_type, name, description and reference source.

    Returns an :class:`OpClass`; ``generic`` when nothing matched. Never raises.
    """
    words = " ".join(filter(None, [defn.name.replace("_", " "), defn.description]))
    found: dict[str, str] = {}
    if defn.op_type == "sampling":
        found["softmax"] = "op_type sampling"
    m = _SOFTMAX.search(defn.reference)
    if m and "softmax" not in found:
        found["softmax"] = f"reference calls {m.group(1)}"
    m = _NORM.search(defn.reference) or _NORM.search(words)
    if m:
        found["norm"] = f"{'reference calls' if _NORM.search(defn.reference) else 'named'} {m.group(1)}"
    names = tuple(c for c in PRIORITY if c in found) or ("generic",)
    return OpClass(name=names[0], all=names, evidence=found)
