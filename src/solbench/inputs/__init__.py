"""Input generation (trusted side)."""

from .generate import PROFILES, differing_profiles, find_blob, input_rules, make_inputs
from .opclass import OpClass, op_classes
from .rules import RULES, InputRule, classify

__all__ = ["PROFILES", "RULES", "InputRule", "OpClass", "classify", "differing_profiles", "find_blob",
           "input_rules", "make_inputs", "op_classes"]
