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

from .checks import finding
from .config import select_workloads
from .evaluator import EvalConfig, Evaluator, evaluate
from .process import reopen, shutdown_all
from .rounds import Oracle
from .workers import SparePool, device_key

__all__ = ["EvalConfig", "Evaluator", "Oracle", "SparePool", "device_key", "evaluate", "finding",
           "reopen", "select_workloads", "shutdown_all"]
