#!/usr/bin/env bash
# The study loop on a GPU, no model needed: an agent command (bench/study_agent_bundled.py) writes
# the bundled Triton solutions of nine l1 problems (and fails on a tenth, cross_entropy_fp32),
# then run -> verify -> report --by-model -> export. Prints each step's output as it comes;
# every step is bounded by a timeout. Output under $OUT (default /tmp/solbench-study-gpu).
#   bash bench/study_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/solbench-study-gpu}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
P=(cumsum_fp32 layer_norm_fp32 relu_bf16 relu_fp32 rms_norm_bf16 rms_norm_fp32 softmax_bf16
   softmax_fp32 sum_dim1_fp32 cross_entropy_fp32)
T=(); F=(); for p in "${P[@]}"; do T+=("l1/$p"); F+=(--problem "$p"); done
step() { echo "== $*"; local t0=$SECONDS; "$@"; echo "== exit $? after $((SECONDS - t0)) s"; }
step timeout 300 python -m solbench.cli generate "${T[@]}" --model bundled-triton \
  --agent-cmd "python bench/study_agent_bundled.py" -o "$OUT/sols" --resume
step timeout 1500 python -m solbench.cli run l1 "${F[@]}" --solutions "$OUT/sols" \
  -o "$OUT/results.jsonl" --resume --device cuda
step timeout 1500 python -m solbench.cli verify "$OUT/results.jsonl" --solutions "$OUT/sols" --device cuda
step timeout 300 python -m solbench.cli report "$OUT/results.jsonl" --by-model -o "$OUT/report"
step timeout 300 python -m solbench.cli report "$OUT/results.jsonl" --verified-only --format markdown
step timeout 300 python -m solbench.cli export "$OUT/results.jsonl" -o "$OUT/bundle"
cat "$OUT/results.jsonl.verify.jsonl" 2>/dev/null | python -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(f"{r[\"definition\"]:22s} {r[\"verdict\"]:15s} claimed {r[\"claimed_speedup\"]:.3f}x "
          f"measured {r[\"verified_speedup\"] or 0:.3f}x low {r.get(\"verified_speedup_low\") or 0:.3f}x")'
