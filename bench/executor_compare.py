"""Compare two `solbench run` results files of one plan (e.g. local on one GPU vs --executor ray
on several): same (solution hash, workload) keys, each exactly once; the same verdict per key
(status, input seed, error figures; timing is not a verdict); which GPU each Ray worker used
(NVML UUID), that no two workers shared a GPU, retried pairs; wall-time ratio when the
throughput JSONs of both runs are given.

Usage:
    python bench/executor_compare.py A/results.jsonl B/results.jsonl --out OUT/compare \\
        [--wall A.json B.json]   # bench/throughput.py --live outputs (live_wall_s)
Writes OUT.json and prints a summary; exit 0 when no key is written twice, the verdicts of the
keys both runs have agree, and no GPU was shared ("complete": both runs have the same keys).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def _read(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _key(t: dict) -> tuple[str, str]:
    return (t["evaluation"].get("solution_hash") or t["solution"], t["workload"]["uuid"])


def _verdict(t: dict):
    e = t["evaluation"]
    c = e.get("correctness") or {}
    return (e["status"], e.get("input_seed"), c.get("max_absolute_error"), c.get("max_relative_error"))


def compare(a: list[dict], b: list[dict]) -> dict:
    ka, kb = Counter(map(_key, a)), Counter(map(_key, b))
    va, vb = {_key(t): _verdict(t) for t in a}, {_key(t): _verdict(t) for t in b}
    common = sorted(set(va) & set(vb))
    diff = [{"key": k, "a": va[k], "b": vb[k]} for k in common if va[k] != vb[k]]
    gpus: dict[str, set] = defaultdict(set)
    for t in b:
        ex = t["evaluation"].get("executor") or {}
        if ex.get("worker") and ex.get("worker") != "driver":
            gpus[ex["worker"]].add(ex.get("gpu_uuid"))
    owners: dict[str, set] = defaultdict(set)
    for w, us in gpus.items():
        for u in us:
            if u is not None:
                owners[u].add(w)
    retried = [t for t in b if (t["evaluation"].get("executor") or {}).get("retried")]
    return {
        "traces": [len(a), len(b)],
        "duplicates": [[list(k) for k, n in ka.items() if n > 1], [list(k) for k, n in kb.items() if n > 1]],
        "only_in_a": [list(k) for k in sorted(set(ka) - set(kb))],
        "only_in_b": [list(k) for k in sorted(set(kb) - set(ka))],
        "verdicts_compared": len(common), "verdict_differences": diff,
        "statuses": [dict(Counter(t["evaluation"]["status"] for t in a)),
                     dict(Counter(t["evaluation"]["status"] for t in b))],
        "gpu_uuids_by_worker": {w: sorted(map(str, us)) for w, us in sorted(gpus.items())},
        "shared_gpus": {u: sorted(ws) for u, ws in owners.items() if len(ws) > 1},
        "workers_with_several_gpus": sorted(w for w, us in gpus.items() if len(us) > 1),
        "retried_traces": len(retried),
        "retried_pairs": sorted({t["evaluation"].get("solution_hash") for t in retried}),
        "lost_workers": sorted({json.dumps(lw, sort_keys=True) for t in retried
                                for lw in (t["evaluation"]["executor"].get("lost") or [])}),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wall", nargs=2, type=Path, default=None)
    args = ap.parse_args(argv)
    res = compare(_read(args.a), _read(args.b))
    if args.wall:
        wa, wb = (json.loads(p.read_text()).get("live_wall_s") for p in args.wall)
        res["wall_s"] = [wa, wb]
        res["speedup_b_over_a"] = (wa / wb) if wa and wb else None
    # a budget-cut run leaves keys out: verdicts are compared on the common keys, and
    # "complete" says whether both runs covered the same keys
    ok = not (any(res["duplicates"]) or res["verdict_differences"] or res["shared_gpus"]
              or res["workers_with_several_gpus"])
    res["agree"] = ok
    res["complete"] = not (res["only_in_a"] or res["only_in_b"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(str(args.out) + ".json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: res[k] for k in ("traces", "verdicts_compared", "statuses", "gpu_uuids_by_worker",
                                          "shared_gpus", "retried_traces", "agree", "complete")}, default=str))
    print(f"only in A: {len(res['only_in_a'])}, only in B: {len(res['only_in_b'])}, "
          f"verdict differences: {len(res['verdict_differences'])}"
          + (f", wall A/B: {res['wall_s'][0]:.0f} s / {res['wall_s'][1]:.0f} s = {res['speedup_b_over_a']:.2f}x"
             if res.get("speedup_b_over_a") else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
