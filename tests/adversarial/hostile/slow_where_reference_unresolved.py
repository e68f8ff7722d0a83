"""Hostile (CPU resolution rule): honest on large inputs, tens of ms of needless work on
small ones, where the eager reference's time is below what the held CPU path resolves.

The candidate's own time is then resolved (far above 3 x the no-op IQR) and the reference's
is not, so the pair proves a slowdown of at least candidate median / reference resolution;
yet the trace records no speedup, the table prints "unresolved", and summaries
(report.summary) leave the whole problem out of the median / geometric-mean speedup
(`solbench project` skips such traces the same way; there is no SOL score on the CPU). A candidate slow only where the reference is too fast to
resolve is then summarised by its large workloads alone.

Measured (shared 2-core host, load 8-12): `solbench eval add2 --solution this --device cpu`
with add2 = add_f32 at n=4096 and n=4Mi: n=4096 latency 230.2 ms against a reference below
40.3 ms, printed "unresolved"; n=4Mi 0.954x; `solbench report` geomean speedup "-"."""
import torch


def run(x, y):
    out = x + y
    if x.numel() <= 65536:
        a = torch.ones(256, 256)
        for _ in range(6):  # real work the reference never does (tens of ms on one core)
            a = a @ a
            a.div_(256.0)
    return out
