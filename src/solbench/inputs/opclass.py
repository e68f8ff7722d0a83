"""Op class of a definition, for choosing the stress distribution (pure, text only).

The class is read from the definition's own words: ``op_type``, ``name``, ``description``
and the reference's source (the torch calls it makes). A definition can be in several
classes (a decoder layer normalises and attends); :func:`op_classes` returns all that match,
with the evidence, and the stress generator applies the first in :data:`PRIORITY`.

The reference's ops are the names it calls, read from its syntax tree (``F.softmax(x)``,
``torch.exp(x)``, ``x.exp()``, ``nn.Softmax(dim=1)``: a function, method or module class
called anywhere in the source, never a word in a comment, a string or the problem's name);
a source that does not parse falls back to a word search.

- ``softmax``: the reference calls ``softmax`` / ``log_softmax`` / ``logsumexp`` /
  ``cross_entropy`` / ``scaled_dot_product_attention`` (or their module classes
  ``Softmax``, ``LogSoftmax``, ``CrossEntropyLoss``), or an exponential or logarithm
  (``exp``, ``exp2``, ``expm1``, ``log``, ``log2``, ``log10``, ``log1p``: a hand-written
  softmax, log-softmax, attention scores, a log-sum-exp), or ``op_type`` is ``sampling``.
  Stress: extreme logits (a random subset of rows offset by +-100..1000, low-temperature rows,
  spikes in the others) with near-ties. Where the reference's own exponential or logarithm
  is not finite on them (a plain ``exp`` overflows), the round does not apply and says so.
- ``norm``: the reference calls ``layer_norm`` / ``rms_norm`` / ``group_norm`` /
  ``batch_norm`` / ``instance_norm`` / ``rsqrt`` / ``var`` / ``var_mean`` / ``std`` /
  ``std_mean`` / ``normalize`` / ``norm`` / ``vector_norm`` / ``matrix_norm`` (or the module
  classes ``LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``BatchNorm*``, ``InstanceNorm*``), or
  the name or description says layernorm / rmsnorm / groupnorm / batchnorm. Stress: large
  offsets of a random subset of rows against a small spread (catastrophic cancellation in a
  one-pass E[x^2] - E[x]^2 variance; x^2 past float16's range for an L2 norm), constant rows
  (variance 0).
- ``generic``: anything else. Stress: magnitudes spread over 10^-3 to 10^2, random signs and
  exact zeros.
"""

from __future__ import annotations

import ast
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


#: called names (functions, methods, module classes) of each class, as the syntax tree shows them
SOFTMAX_CALLS = frozenset({"softmax", "log_softmax", "logsumexp", "cross_entropy", "scaled_dot_product_attention",
                           "Softmax", "LogSoftmax", "CrossEntropyLoss", "exp", "exp2", "expm1", "log", "log2",
                           "log10", "log1p", "exp_", "log_"})
NORM_CALLS = frozenset({"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "rsqrt", "var",
                        "var_mean", "std", "std_mean", "normalize", "norm", "vector_norm", "matrix_norm",
                        "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                        "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "rsqrt_"})


def called_names(source: str, skip: str | None = None) -> list[str] | None:
    """The names the source calls: ``f`` of ``f(...)`` and ``attr`` of ``obj.attr(...)``,
    leaving out the body of the top-level function ``skip`` (the custom inputs entrypoint:
    the ops that make the inputs are not the op judged); None when the source does not
    parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    if skip:
        tree.body = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                  and n.name == skip)]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.append(f.id)
            elif isinstance(f, ast.Attribute):
                out.append(f.attr)
    return out


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
    calls = called_names(defn.reference, skip=getattr(defn, "custom_inputs_entrypoint", None))
    if calls is None:  # not Python we can parse: the words of the source
        m = _SOFTMAX.search(defn.reference)
        sm = m.group(1) if m else None
        m = _NORM.search(defn.reference)
        nm = m.group(1) if m else None
    else:
        sm = next((c for c in calls if c in SOFTMAX_CALLS), None)
        nm = next((c for c in calls if c in NORM_CALLS), None)
    if sm and "softmax" not in found:
        found["softmax"] = f"reference calls {sm}"
    if nm:
        found["norm"] = f"reference calls {nm}"
    else:
        m = _NORM.search(words)
        if m:
            found["norm"] = f"named {m.group(1)}"
    names = tuple(c for c in PRIORITY if c in found) or ("generic",)
    return OpClass(name=names[0], all=names, evidence=found)
