"""Input generation (trusted side).

The names below load their module on first use: :mod:`.generate` and :mod:`.rules` bring
torch, which :mod:`.seeds` (a seed's fingerprint, wanted by the results store of a process
that only prints traces a server made) does not need.
"""

from importlib import import_module

_HOME = {
    "PROFILES": "generate", "SOURCES": "generate", "PlannedInput": "generate",
    "differing_profiles": "generate", "find_blob": "generate", "input_rules": "generate",
    "load_blob": "generate", "make_inputs": "generate", "plan_inputs": "generate",
    "is_index_name": "structure", "synthesize_indices": "structure",
    "OpClass": "opclass", "op_classes": "opclass",
    "RULES": "rules", "InputRule": "rules", "classify": "rules",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)
