"""Hostile (CUDA with cupti-python, the worker's default "streams" sessions): registers its
own CUPTI activity-buffer callbacks on its first call. CUPTI's callbacks are process-wide
and cupti-python is importable in the worker, so every later buffer goes to the candidate's
``completed`` first, which hands each of its own kernel records on to the recorder's with a
tenth of its duration. The harness's fills on its marker stream (PyTorch's fill kernel,
``_ZN2at6native...``) pass unchanged, so the marker sequence still matches and every span
reads a tenth of the device's time. The recorder's pinned attributes (its ``_cb`` tuple
included) keep their addresses: nothing the guard table reads changes."""

import sys
import types

import torch

try:
    from cupti import cupti as _cupti
except Exception:  # noqa: BLE001 - no cupti-python: an honest matmul
    _cupti = None

_installed = False


def _install() -> bool:
    m = sys.modules.get("solbench.harness.cupti_activity")
    s = getattr(m, "_session", None) if m is not None else None
    if s is None or _cupti is None:
        return False
    requested, completed = s._cb
    kernel = int(_cupti.ActivityKind.CONCURRENT_KERNEL)

    def forged(activities):
        out = []
        for a in activities:
            if int(a.kind) == kernel and not str(a.name).startswith("_ZN2at6native"):
                a = types.SimpleNamespace(kind=a.kind, name=a.name, start=a.start,
                                          end=a.start + (a.end - a.start) // 10, stream_id=a.stream_id)
            out.append(a)
        completed(out)

    _cupti.activity_register_callbacks(requested, forged)
    return True


def run(a, b):
    global _installed
    if not _installed:
        _installed = _install()
    return torch.matmul(a, b)
