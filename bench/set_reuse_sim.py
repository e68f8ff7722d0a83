"""Why the trusted reference gets a new input set for every timed call, as the candidate does
(harness/timed.py ``_timed_call``; docs/harness.md, "Timing"): a model of how often the
paired-block rule (harness/resolution.py) resolves a speedup of the reference timed against
itself when its time depends on its input values (a routing, a sort, top-k: a spread ``cv``
of the time between sets, 1% noise between calls on one set).

The candidate gets a new set every call; the reference either a new set every call
("fresh"), each set for 4 calls counted across its blocks ("reuse4"), or counted per block
("reuse4-per-block"). The CUDA rule: 2 block pairs, margin 2%; the CPU's: 4 pairs, 5%; m calls
a block on K slots, 2000 trials a case (numpy, seed 2). A case that resolves more often than
"fresh" makes the rule claim differences that are not there. Seen: CUDA K=4, m=25, cv=5%:
fresh 4.7%, reuse4 11.3%, reuse4-per-block 8.4%; CPU K=4, m=4, cv=10%: 0.7%, 11.7%, 0.9%.

    python bench/set_reuse_sim.py
"""
import numpy as np

rng = np.random.default_rng(2)


def block(m, k, uses, cv, noise, state, reset):
    """Median of one block of m calls on K slots; a slot's set is replaced after ``uses``
    calls (``reset``: every set replaced at the block's start)."""
    if reset:
        for s in range(k):
            state[s] = [0, 10**9]
    out = []
    for i in range(m):
        s = i % k
        if state[s][1] >= uses:
            state[s] = [1 + cv * rng.standard_normal(), 0]
        state[s][1] += 1
        out.append(state[s][0] * (1 + noise * rng.standard_normal()))
    return np.median(out)


def trial(m, k, uses, cv, pairs, margin, reset):
    """One same-code pair: True when every block ratio lies beyond 1 +- margin on one side."""
    cs = [[0, 10**9] for _ in range(k)]
    rs = [[0, 10**9] for _ in range(k)]
    r = [block(m, k, uses, cv, 0.01, rs, reset) / block(m, k, 1, cv, 0.01, cs, False) for _ in range(pairs)]
    return all(x > 1 + margin for x in r) or all(x < 1 / (1 + margin) for x in r)


if __name__ == "__main__":
    for name, pairs, margin, ms in (("CUDA", 2, 0.02, (10, 25)), ("CPU", 4, 0.05, (4,))):
        for k in (2, 4, 8):
            for m in ms:
                for cv in (0.05, 0.1):
                    r = [np.mean([trial(m, k, u, cv, pairs, margin, rs) for _ in range(2000)])
                         for u, rs in ((1, False), (4, False), (4, True))]
                    print(f"{name} K={k} m={m} cv={cv}: fresh {r[0]:.3f} reuse4 {r[1]:.3f} "
                          f"reuse4-per-block {r[2]:.3f}", flush=True)
