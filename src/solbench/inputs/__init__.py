"""Input generation (trusted side)."""

from .generate import (PROFILES, SOURCES, PlannedInput, differing_profiles, find_blob, input_rules, load_blob,
                       make_inputs, plan_inputs)
from .opclass import OpClass, op_classes
from .rules import RULES, InputRule, classify
from .structure import is_index_name, synthesize_indices

__all__ = ["PROFILES", "RULES", "SOURCES", "InputRule", "OpClass", "PlannedInput", "classify", "differing_profiles",
           "find_blob", "input_rules", "is_index_name", "load_blob", "make_inputs", "op_classes", "plan_inputs",
           "synthesize_indices"]
