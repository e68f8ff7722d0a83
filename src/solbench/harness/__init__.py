"""The isolated evaluation harness: worker process, build step, correctness, timing, guards.

Public entry: :func:`evaluate` with an :class:`EvalConfig`. Besides it, the layers above
may use :class:`Oracle` (the trusted reference run in the parent: outputs, fp64 truth, the
stress-round check; the integrity screen judges a problem's reference with it), what a
long-lived caller (``solbench serve``) needs to keep workers ahead of need and end them
(:class:`SparePool`, :func:`device_key`, :func:`shutdown_all`, :func:`reopen`), the run layer's
:func:`finding` (a finding of the check registry, for evidence gathered before the harness
runs) and :func:`select_workloads`, and the pure modules
:mod:`.correctness` and :mod:`.precision`. The other modules are the harness's own
(an import-linter contract in pyproject.toml keeps them so: docs/architecture.md).

Inside, three parts (docs/architecture.md, "Inside the harness"; the contract ``worker-side``
keeps the first off the third):

- worker side, run in the candidate's process: :mod:`.worker` (the request loop, one handler
  per request model), :mod:`.build` (+ the compiler child :mod:`.build_cpp`), :mod:`.guards`
  (snapshot, interposition, dispatcher table), :mod:`.memguard`, :mod:`.shm`, :mod:`.pages`,
  :mod:`.l2`, :mod:`.flagread`, :mod:`.timing`, :mod:`.correctness`, :mod:`.checks`, and the
  sandbox's last steps in :mod:`.sandbox`, :mod:`.memcap`, :mod:`.taskcap`;
- the wire: :mod:`.protocol` (``REQUESTS``: op -> request model, and the reply models);
- parent side: :mod:`.process` (the worker handle) and everything else.
"""

import importlib

#: public name -> the module that defines it. Imported on first use (PEP 562), not with the
#: package: the worker (``python -m solbench.harness.worker``) and a parent that only starts
#: workers ahead of need (``solbench eval``'s early start, harness/workers.py) import the
#: package first, and neither needs the evaluator, the rounds or the checks (about 0.6 s of
#: imports, torch's first among them, before a worker could be spawned)
_PUBLIC = {"finding": ".checks", "select_workloads": ".config", "EvalConfig": ".evaluator",
           "Evaluator": ".evaluator", "evaluate": ".evaluator", "reopen": ".process",
           "shutdown_all": ".process", "Oracle": ".rounds", "SparePool": ".workers",
           "device_key": ".workers"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    mod = _PUBLIC.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
