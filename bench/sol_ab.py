"""CPU seconds of two versions of the SOL counting code on the same workloads, taken back to back.

On a shared machine one run's CPU seconds depend on the other tenants (caches, SMT siblings),
so a figure from another hour says little about a change. This runs the same workloads with
the code under ``--old`` and under ``--new`` (each a ``src`` directory) in fresh processes,
alternately, ``--repeat`` times, and prints each process's CPU seconds per problem
(``sol.batch.problem_counts``; imports and one warm-up problem excluded).

    python bench/sol_ab.py --old ../main/src --new src [--repeat 2]
        [--case Quant/029_nvfp4_fused_mlp_silu_gating:8:12 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "sol-execbench-dev"
#: problem:first:stop; the real-tensor problems that take most of the dev set's counting time
CASES = ["Quant/029_nvfp4_fused_mlp_silu_gating:8:12",
         "L2/047_moe_training_token_repeat_and_expert_computation:12:16",
         "FlashInfer-Bench/012_gqa_paged_decode_h32_kv4_d128_ps1:16:20",
         "Quant/025_nvfp4_attention_qkv_projection:0:4"]

_CHILD = """
import json, sys, time, torch
torch.set_num_threads(1)
from solbench.sol.batch import problem_counts
from solbench.spec import load_problem
data, cases = sys.argv[1], sys.argv[2:]
problem_counts(load_problem(data + '/L1/021_vision_cu_seqlens_variable_length_attention'))  # warm-up
out = {}
for case in cases:
    rel, a, b = case.rsplit(':', 2)
    p = load_problem(data + '/' + rel)
    c0 = time.process_time()
    problem_counts(p, p.workloads[int(a):int(b)])
    out[case] = round(time.process_time() - c0, 2)
print(json.dumps(out))
"""


def run(src: Path, data: Path, cases: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(data), *cases], env=env, capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--case", action="append", default=None, help="problem:first:stop (repeatable)")
    args = ap.parse_args(argv)
    cases = args.case or CASES
    print("load average", os.getloadavg())
    for _ in range(args.repeat):
        for tag, src in (("old", args.old), ("new", args.new)):
            res = run(src, args.data, cases)
            print(tag, " | ".join(f"{Path(c.split(':')[0]).name[:24]} {s:.2f} s" for c, s in res.items()), flush=True)
    print("load average", os.getloadavg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
