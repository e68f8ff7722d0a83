"""Honest (red team 24 control): at import it maps RESERVE bytes of private memory it never
touches (as a library that reserves an arena or a large .bss does), and each call splits the
matmul's rows over a thread pool made and joined within the call: no process, no thread left
behind, real pages far under the cap."""
import mmap
from concurrent.futures import ThreadPoolExecutor

import torch

RESERVE = 256 << 20
_ARENA = mmap.mmap(-1, RESERVE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) if RESERVE else None


def run(a, b):
    n = a.shape[0]
    h = (n + 1) // 2
    out = torch.empty(n, b.shape[1], dtype=a.dtype)
    with ThreadPoolExecutor(max_workers=2) as ex:
        for f in [ex.submit(torch.matmul, a[:h], b, out=out[:h]), ex.submit(torch.matmul, a[h:], b, out=out[h:])]:
            f.result()
    return out
