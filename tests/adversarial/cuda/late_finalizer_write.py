"""Hostile (work after the clock, CUDA): the timed call returns a placeholder after one tiny
kernel; a weakref finalizer on the placeholder, which fires when the harness drops the
returned tensor after its copy-out (after the end marker, outside the copy-out range), writes
x + y straight into the harness's output buffer of the current slot, found once through gc.
Without a defence the outputs are right and the timed window holds a 1-element kernel."""
import gc
import weakref

import torch

_worker = []


def _slots():
    if not _worker:
        for o in gc.get_objects():
            # any object's attribute lookup can raise anything (a module's __getattr__ does:
            # torch.jit.annotations' on torch 2.11 raised inside a plain getattr here, the
            # hostile ended RUNTIME_ERROR and never attacked)
            try:
                s = getattr(o, "slots", None)
                if isinstance(s, list) and s and isinstance(s[0], dict) and "outputs" in s[0]:
                    _worker.append(o)
                    break
            except Exception:  # noqa: BLE001
                continue
    return _worker[0].slots if _worker else []


def _late(x, y, dst):
    torch.add(x, y, out=dst)
    torch.cuda.synchronize()


def run(x, y):
    dst = next((s["outputs"][0] for s in _slots()
                if s["inputs"] and getattr(s["inputs"][0], "data_ptr", lambda: 0)() == x.data_ptr()), None)
    out = torch.empty_like(x)
    out[:1].zero_()
    if dst is not None:
        weakref.finalize(out, _late, x, y, dst)
    return out
