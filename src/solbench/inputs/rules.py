"""Which generation rule each random input gets (pure: names, shapes, dtypes, descriptions).

A rule is chosen once per input from what the definition says about it, in this order
(the first match wins; docs/inputs.md has the table with each rule's source):

1. A declared role (``Definition.input_roles``, a solbench extension for our own suites).
2. dtype-level defaults that upstream applies before any name rule: bool -> ``bool_01``;
   integers -> ``int_uniform`` (upstream's ranges); fp8 -> ``fp8_randn_clamped``; packed
   fp4 -> ``fp4_randn_quantized`` (no name rule applies to these dtypes upstream).
3. Upstream SOL-ExecBench's name/shape/description rules for float inputs (its input
   generator, ``sol_execbench/core/bench/io.py``: ``_generate_heuristic_tensor``), in
   upstream's order: norm weight -> ``norm_weight_ones``, norm bias -> ``norm_bias_zeros``,
   causal attention mask -> ``causal_mask_additive``, binary mask -> ``binary_mask``, RoPE
   tables -> ``rope_cos`` / ``rope_sin``, statistics -> ``positive``, SSM decay parameters ->
   ``ssm_a_cumsum`` / ``ssm_a_log`` / ``ssm_a`` / ``ssm_gate``, softmax outputs ->
   ``softmax_rows``, weight matrices -> ``weight_fan_in``; otherwise ``randn``.
4. ``sampling_probs`` for the input ``probs`` of an ``op_type == "sampling"`` definition
   (upstream softmaxes whatever was drawn for it).

Each function here takes only the input's own facts, so the table in
``tests/inputs/test_rules_dev.py`` can be checked by hand against a definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: rule id -> (what it generates, where the rule comes from). docs/inputs.md mirrors this.
RULES: dict[str, tuple[str, str]] = {
    "randn": ("standard normal", "upstream default for float dtypes"),
    "fp8_randn_clamped": ("randn clamped to [-2, 2], cast to fp8", "upstream default for fp8"),
    "fp4_randn_quantized": ("randn rounded to the nearest e2m1 code, packed", "upstream default for fp4"),
    "bool_01": ("uniform {False, True}", "upstream default for bool"),
    "int_uniform": ("uniform integers: int8 [-128, 128), wider ints [-1024, 1024)",
                    "upstream default for integer dtypes"),
    "norm_weight_ones": ("all ones", "upstream name rule: normalisation weight"),
    "norm_bias_zeros": ("all zeros", "upstream name rule: normalisation bias"),
    "causal_mask_additive": ("0 on and below the diagonal, finfo(dtype).min above it",
                             "upstream name/shape/description rule: causal attention mask"),
    "binary_mask": ("uniform {0, 1} in the input's dtype", "upstream name/description rule: binary mask"),
    "rope_cos": ("cos(t), t = randn clamped to [-pi, pi]", "upstream name rule: RoPE cosine table"),
    "rope_sin": ("sin(t), t = randn clamped to [-pi, pi]", "upstream name rule: RoPE sine table"),
    "positive": ("|randn| + 0.1", "upstream name rule: rstd / std / variance"),
    "ssm_a_cumsum": ("cumulative sum over the last dim of U(-0.1, 0)", "upstream name rule: A_cumsum"),
    "ssm_a_log": ("U(-5, -1)", "upstream name rule: A_log"),
    "ssm_a": ("U(-1, -0.001)", "upstream name rule: A"),
    "ssm_gate": ("U(-5, 0)", "upstream name rule: g (decay gate)"),
    "softmax_rows": ("softmax over the last dim of randn", "upstream name/description rule: softmax output"),
    "weight_fan_in": ("randn / sqrt(last dim)", "upstream name/shape rule: weight matrix"),
    "sampling_probs": ("softmax over the last dim of the drawn values",
                       "upstream rule: input 'probs' of a sampling definition"),
    # solbench roles (Definition.input_roles)
    "role_index": ("uniform integers in [0, axis value)", "solbench role index:<axis>"),
    "role_positive": ("|randn| + 0.1", "solbench role positive"),
    "role_unit_interval": ("U(0, 1)", "solbench role unit_interval"),
    "role_ones": ("all ones", "solbench role ones"),
    "role_mask": ("uniform {0, 1}", "solbench role mask"),
    "role_uniform": ("U(lo, hi)", "solbench role uniform:<lo>:<hi>"),
    "role_scaled": ("randn / sqrt(last dim)", "solbench role scaled"),
}

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_WEIGHT_SUFFIXES = ("_weight", "_weights", "_proj", "_projs", "_proj_weight", "_proj_weights",
                    "_weight_matrix")
_NORM_PREFIX_ENDS = ("_norm", "_layernorm", "layernorm")
_BINARY_MASK_NAMES = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_BINARY_MASK_WORDS = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
_ROPE_COS = ("cos", "cos_cached", "rope_cos")
_ROPE_SIN = ("sin", "sin_cached", "rope_sin")
_POSITIVE_NAMES = ("rstd", "std", "variance", "var")
_SOFTMAX_NAMES = ("attn_weights", "attention_weights", "routing_weights")
_SSM = {"A_cumsum": "ssm_a_cumsum", "A_log": "ssm_a_log", "A": "ssm_a", "g": "ssm_gate"}


@dataclass(frozen=True)
class InputRule:
    """The rule one input gets. ``rule``: a key of :data:`RULES`; ``arg``: the role's argument
    (the axis of ``index:<axis>``, ``"lo:hi"`` of ``uniform``), else None."""

    rule: str
    arg: str | None = None

    @property
    def source(self) -> str:
        return RULES[self.rule][1]


def _strip_digits(s: str) -> str:
    return s.rstrip("0123456789")


def _affix_rule(name: str, suffix: str) -> bool:
    # "<...>_norm<suffix>", "<...>layernorm<suffix>", "norm<suffix>" or a numbered prefix such
    # as "layer_norm1<suffix>" / "enorm<suffix>" (upstream strips trailing digits, then asks
    # for a prefix ending in "norm")
    if name == "norm" + suffix:
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    if prefix.endswith(_NORM_PREFIX_ENDS):
        return True
    stripped = _strip_digits(prefix)
    return bool(stripped) and stripped.endswith(("norm", "layernorm"))


def is_norm_weight(name: str) -> bool:
    """``norm_weight``, ``*_norm_weight``, ``*layernorm_weight``, ``layer_norm1_weight``,
    ``enorm_weight`` ... (not a bare ``weight``)."""
    return _affix_rule(name, "_weight")


def is_norm_bias(name: str) -> bool:
    """The bias counterpart of :func:`is_norm_weight`."""
    return _affix_rule(name, "_bias")


def is_causal_mask(name: str, shape: tuple[int, ...], description: str | None) -> bool:
    """A square trailing pair of dims and the name ``attention_mask`` / ``causal_mask``, or a
    description naming both "attention mask" and "causal"."""
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return False
    if name in ("attention_mask", "causal_mask"):
        return True
    d = (description or "").lower()
    return "attention mask" in d and "causal" in d


def is_binary_mask(name: str, description: str | None) -> bool:
    """Upstream's mask names, or ``*_mask`` whose description says it holds 0/1."""
    if name in _BINARY_MASK_NAMES:
        return True
    d = (description or "").lower()
    return name.endswith("_mask") and any(w in d for w in _BINARY_MASK_WORDS)


def is_positive(name: str) -> bool:
    """``rstd``/``std``/``variance``/``var``, with a ``_`` prefix or a trailing number."""
    if name in _POSITIVE_NAMES or name.endswith(("_rstd", "_std", "_variance", "_var")):
        return True
    base = _strip_digits(name)
    return base in _POSITIVE_NAMES or base.endswith(("_rstd", "_std", "_var"))


def is_softmax_output(name: str, description: str | None) -> bool:
    """Attention/routing weights by name, or a description mentioning a softmax output."""
    if name in _SOFTMAX_NAMES:
        return True
    d = (description or "").lower()
    return "softmax" in d and "output" in d


def is_weight_matrix(name: str, shape: tuple[int, ...]) -> bool:
    """At least 2-D and named ``weight`` or ``*_weight(s)`` / ``*_proj(s)`` (numbered too)."""
    if len(shape) < 2:
        return False
    if name == "weight" or name.endswith(_WEIGHT_SUFFIXES):
        return True
    stripped = _strip_digits(name)
    return stripped == "weight" or (bool(stripped) and stripped.endswith(_WEIGHT_SUFFIXES))


def _role_rule(role: str) -> InputRule:
    if role.startswith("index:"):
        return InputRule("role_index", role.split(":", 1)[1])
    if role.startswith("uniform:"):
        return InputRule("role_uniform", role.split(":", 1)[1])
    key = "role_" + role
    if key not in RULES:
        raise ValueError(f"unknown input role {role!r}")
    return InputRule(key)


def classify(name: str, shape: tuple[int, ...], dtype: torch.dtype, description: str | None = None,
             *, role: str | None = None, op_type: str | None = None) -> InputRule:
    """The rule for one random tensor input (see the module doc for the order).

    Args:
        name: the input's name in the definition. shape: its concrete shape.
        dtype: its torch dtype. description: the definition's description of it.
        role: its declared role (``Definition.input_roles``), if any.
        op_type: the definition's ``op_type`` (``"sampling"`` turns on ``sampling_probs``).

    Raises:
        ValueError: an unknown role.
    """
    if role is not None:
        return _role_rule(role)
    if dtype == torch.bool:
        return InputRule("bool_01")
    if not (dtype.is_floating_point or dtype == torch.float4_e2m1fn_x2):
        return InputRule("int_uniform")
    if dtype in _FP8:
        return InputRule("fp8_randn_clamped")
    if dtype == torch.float4_e2m1fn_x2:
        return InputRule("fp4_randn_quantized")
    if op_type == "sampling" and name == "probs":
        # upstream draws by the rules below, then softmaxes: for "probs" no rule below matches
        return InputRule("sampling_probs")
    if is_norm_weight(name):
        return InputRule("norm_weight_ones")
    if is_norm_bias(name):
        return InputRule("norm_bias_zeros")
    if is_causal_mask(name, shape, description):
        return InputRule("causal_mask_additive")
    if is_binary_mask(name, description):
        return InputRule("binary_mask")
    if name in _ROPE_COS:
        return InputRule("rope_cos")
    if name in _ROPE_SIN:
        return InputRule("rope_sin")
    if is_positive(name):
        return InputRule("positive")
    if name in _SSM:
        return InputRule(_SSM[name])
    if is_softmax_output(name, description):
        return InputRule("softmax_rows")
    if is_weight_matrix(name, shape):
        return InputRule("weight_fan_in")
    return InputRule("randn")
