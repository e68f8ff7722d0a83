"""Hostile (work after the clock, CPU analog of cuda/late_finalizer_write.py): each call returns
a placeholder at once; a weakref finalizer on the placeholder, which fires when the harness
drops the returned tensor after its copy-out, writes x + y straight into the harness's output
buffer of the current slot (found once through gc, every attribute lookup guarded: a
module's __getattr__ may raise anything). The worker's clock holds an empty call, and the
sum lands in the output after the copy-out of the placeholder."""
import gc
import weakref

import torch

_worker = []


def _slots():
    if not _worker:
        for o in gc.get_objects():
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


def run(x, y):
    dst = None
    for s in _slots():
        try:
            if s["inputs"] and s["inputs"][0].data_ptr() == x.data_ptr():
                dst = s["outputs"][0]
                break
        except Exception:  # noqa: BLE001
            continue
    out = torch.zeros_like(x)
    if dst is not None:
        weakref.finalize(out, _late, x, y, dst)
    return out
