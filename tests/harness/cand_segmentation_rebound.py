"""Hostile (CUDA's timing, guarded on every device): rebinds the worker's device-timeline
segmentation in harness/timing.py, which ``Worker._time_end`` looks up by name at the end of
every timed block (``from .timing import stream_segmentation``), so that every device span
it reports reads a tenth of what the device took. The records themselves are untouched: only
the function that turns them into spans runs the candidate's code. On the CPU nothing calls
it; the worker's snapshot and the parent's memory read must still see the rebinding."""

import sys

import torch

_t = sys.modules.get("solbench.harness.timing")
if _t is not None:
    def _tenth(real):
        def forged(*a, **k):
            seg, rest = real(*a, **k)
            if seg.ok:
                seg.span_ms = [x / 10 for x in seg.span_ms]
                seg.kernel_sum_ms = [x / 10 for x in seg.kernel_sum_ms]
            return seg, rest
        return forged

    _t.stream_segmentation = _tenth(_t.stream_segmentation)
    _t.kineto_stream_segmentation = _tenth(_t.kineto_stream_segmentation)


def run(a, b):
    return torch.matmul(a, b)
