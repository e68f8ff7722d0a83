#!/usr/bin/env bash
# One device session stage on a 2-GPU H200 host (the `device` tool's nvidia-h200-x2), two lanes
# in parallel, one per GPU, each gated on bench/device_smoke.py printing PASSED on its GPU.
# Everything lands under $OUT/<stage>/ and is packed into $OUT/<stage>.tgz (the tool returns
# at most 8 files). Wall deadline: DEADLINE_S (default 560) from the start.
#
#   bash bench/device_run.sh harness   # lane 0: dev-dataset harness, timing fidelity, SOL on device
#                                      # lane 1: CUDA adversarial corpus, then the dlrm suite
#   bash bench/device_run.sh suites    # lanes 0/1: the l1 suite, shards 0/2 and 1/2
#   bash bench/device_run.sh fidelity  # lane 0 only: GEMM timing fidelity with clocks
#   RESUME_FROM=bench/results/suites_device SUITE_COMPILE_THREADS=1 bash bench/device_run.sh rest
#                                      # lane 0: CUDA corpus (SKIP_CORPUS=1: not), rest of l1 0/2
#                                      # lane 1: rest of dlrm, then of l1 1/2;
#                                      # SUITE_ITERS=N sets the timed iterations
#   RESUME_FROM=bench/results/suites_device bash bench/device_run.sh final
#                                      # lane 0: CUDA corpus, dev harness, then l1 shard 0/2
#                                      # lane 1: dlrm, then l1 shard 1/2 (both resumed)
#
# Needs (carried, git-ignored): .whl/ (pydantic wheels for Python 3.12) and
# .devdata/sol-execbench-dev (the dev dataset). Never changes clocks or GPU modes.
set -uo pipefail
stage="${1:?stage: harness|suites}"
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-560}"
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$(( l > 5 ? l - 5 : 1 ))"; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
mkdir -p shared/datasets && ln -sfn "$PWD/.devdata/sol-execbench-dev" shared/datasets/sol-execbench-dev
R="${OUT:-/tmp/out}/$stage"
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/gpus.csv" 2>&1

smoke() {  # $1 = lane; PASSED on the lane's GPU or the lane stops
  timeout "$(cap 120)" python3 bench/device_smoke.py > "$R/smoke_$1.txt" 2>&1
  grep -q '^PASSED' "$R/smoke_$1.txt"
}

lane_harness0() {
  smoke 0 || { echo "lane 0: smoke failed"; return 1; }
  timeout "$(cap 170)" python3 bench/device_harness.py --out "$R/harness" \
    --data .devdata/sol-execbench-dev --per-problem 1 --iters 20 --time-budget-s 130 \
    --no-ref-timing --skip "$HARNESS_SKIP" > "$R/harness.log" 2>&1
  timeout "$(cap 200)" python3 bench/timing_fidelity.py --out "$R/fidelity" --repeats 2 \
    > "$R/fidelity.log" 2>&1
  timeout "$(cap 400)" python3 bench/sol_device.py --out "$R/sol_device" > "$R/sol_device.log" 2>&1
}

lane_harness1() {
  smoke 1 || { echo "lane 1: smoke failed"; return 1; }
  timeout "$(cap 260)" python3 bench/integrity_gpu.py --quick --jobs 6 --wall-s 90 \
    --out "$R/integrity" > "$R/integrity.log" 2>&1
  python3 bench/suites_device.py --suite dlrm --out "$R/dlrm_0" --budget-s "$(cap 600)" \
    > "$R/dlrm.log" 2>&1
}

lane_final0() {
  smoke 0 || { echo "lane 0: smoke failed"; return 1; }
  timeout "$(cap 240)" python3 bench/integrity_gpu.py --quick --jobs 6 --wall-s 90 \
    --out "$R/integrity" > "$R/integrity.log" 2>&1
  timeout "$(cap 130)" python3 bench/device_harness.py --out "$R/harness" \
    --data .devdata/sol-execbench-dev --per-problem 1 --iters 20 --time-budget-s 100 \
    --no-ref-timing --no-examples --skip "$HARNESS_SKIP,021_vision_cu_seqlens_variable_length_attention" \
    > "$R/harness.log" 2>&1
  suite_resume l1 0
}

lane_final1() {
  smoke 1 || { echo "lane 1: smoke failed"; return 1; }
  suite_resume dlrm 0 ""
  suite_resume l1 1
}

suite_resume() {  # $1 = suite, $2 = shard index, $3 = "" for no sharding
  local name="$1_$2"
  [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/$name" ] && cp -r "$RESUME_FROM/$name" "$R/"
  local shard=(--shard "$2/2"); [ "${3-x}" = "" ] && shard=()
  env ${SUITE_COMPILE_THREADS:+TORCHINDUCTOR_COMPILE_THREADS=$SUITE_COMPILE_THREADS} \
  python3 bench/suites_device.py --suite "$1" "${shard[@]}" --out "$R/$name" \
    --budget-s "$(cap 600)" ${SUITE_ITERS:+--iters $SUITE_ITERS} \
    > "$R/$name.log" 2>&1
}

lane_rest0() {  # CUDA corpus on the current harness, then the rest of l1 shard 0
  smoke 0 || { echo "lane 0: smoke failed"; return 1; }
  [ -n "${SKIP_CORPUS:-}" ] || timeout "$(cap 240)" python3 bench/integrity_gpu.py --quick --jobs 6 \
    --wall-s 90 --out "$R/integrity" > "$R/integrity.log" 2>&1
  suite_resume l1 0
}

lane_rest1() {  # the rest of dlrm, then of l1 shard 1
  smoke 1 || { echo "lane 1: smoke failed"; return 1; }
  suite_resume dlrm 0 ""
  suite_resume l1 1
}

lane_suites() {  # $1 = lane = shard index
  smoke "$1" || { echo "lane $1: smoke failed"; return 1; }
  # RESUME_FROM=DIR holding l1_<i>/results.jsonl from an earlier stage: continue it (--resume)
  [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/l1_$1" ] && cp -r "$RESUME_FROM/l1_$1" "$R/"
  python3 bench/suites_device.py --suite l1 --shard "$1/2" --out "$R/l1_$1" \
    --budget-s "$(cap 600)" > "$R/l1_$1.log" 2>&1
}

# dev problems already PASSED on the H200 (bench/results/device_harness.json) and those that
# cannot run here (missing safetensors blobs; NVFP4 needs Blackwell)
HARNESS_SKIP="004_gemm_n128_k2048,008_gemm_n4096_k14336,024_rmsnorm_h2048,012_gqa_paged_decode_h32_kv4_d128_ps1"
HARNESS_SKIP+=",016_gqa_ragged_prefill_causal_h32_kv4_d128,020_moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
HARNESS_SKIP+=",001_attention_softmax_dropout_value_matmul_backward,005_conv_gated_projection_with_causal_conv"
HARNESS_SKIP+=",009_expert_token_scatter_with_weighted_forward_backward,013_fused_residual_rms_norm_backward"
HARNESS_SKIP+=",017_moe_expert_swiglu_with_down_projection_backward,003_grouped_query_attention_with_rope_backward"
HARNESS_SKIP+=",007_multimodal_rotary_embedding_attention,011_moe_sparse_routing_and_dispatch_backward"
HARNESS_SKIP+=",015_audio_sinusoidal_position_embedding_with_conv_projection,019_decoder_layer_fused_attention_mlp"
HARNESS_SKIP+=",001_fp8_attention_output_projection,005_fp8_moe_router_projection,013_fp8_mla_kv_compression_projection"
HARNESS_SKIP+=",017_fp8_shared_expert_mlp,009_nvfp4_vision_temporal_patch_merge_with_projection"
HARNESS_SKIP+=",025_nvfp4_attention_qkv_projection,029_nvfp4_fused_mlp_silu_gating,033_nvfp4_moe_routing_with_topk_selection"

case "$stage" in
  harness)
    (export CUDA_VISIBLE_DEVICES=0; lane_harness0) > "$R/lane0.txt" 2>&1 &
    (export CUDA_VISIBLE_DEVICES=1; lane_harness1) > "$R/lane1.txt" 2>&1 &
    ;;
  suites)
    (export CUDA_VISIBLE_DEVICES=0; lane_suites 0) > "$R/lane0.txt" 2>&1 &
    (export CUDA_VISIBLE_DEVICES=1; lane_suites 1) > "$R/lane1.txt" 2>&1 &
    ;;
  fidelity)  # lane 0: GEMM fidelity with duty-cycle-matched and back-to-back truth + clocks
    (export CUDA_VISIBLE_DEVICES=0; smoke 0 && timeout "$(cap 400)" python3 bench/timing_fidelity.py \
       --out "$R/fidelity" --repeats 2 --families gemm > "$R/fidelity.log" 2>&1) > "$R/lane0.txt" 2>&1 &
    ;;
  rest)  # RESUME_FROM=bench/results/suites_device SUITE_COMPILE_THREADS=1 bash bench/device_run.sh rest
    (export CUDA_VISIBLE_DEVICES=0; lane_rest0) > "$R/lane0.txt" 2>&1 &
    (export CUDA_VISIBLE_DEVICES=1; lane_rest1) > "$R/lane1.txt" 2>&1 &
    ;;
  finish)  # lane 0: rest of l1 0/2, then GEMM timing fidelity with clocks; lane 1: rest of l1 1/2
    (export CUDA_VISIBLE_DEVICES=0; smoke 0 && suite_resume l1 0 && timeout "$(cap 400)" \
       python3 bench/timing_fidelity.py --out "$R/fidelity" --repeats 2 --families gemm \
       > "$R/fidelity.log" 2>&1) > "$R/lane0.txt" 2>&1 &
    (export CUDA_VISIBLE_DEVICES=1; smoke 1 && suite_resume l1 1) > "$R/lane1.txt" 2>&1 &
    ;;
  final)
    (export CUDA_VISIBLE_DEVICES=0; lane_final0) > "$R/lane0.txt" 2>&1 &
    (export CUDA_VISIBLE_DEVICES=1; lane_final1) > "$R/lane1.txt" 2>&1 &
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
wait
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
  --format=csv >> "$R/gpus.csv" 2>&1
echo "== $stage done after $(( $(date +%s) - T0 )) s"
for f in "$R"/smoke_*.txt "$R"/lane*.txt; do echo "--- $f"; tail -5 "$f"; done
tail -4 "$R/harness.log" "$R/fidelity.log" "$R/sol_device.log" "$R/integrity.log" "$R/dlrm.log" \
  "$R"/l1_*.log "$R"/dlrm_*.log 2>/dev/null
rm -rf "$R"/*/solutions_* 2>/dev/null
tar czf "${OUT:-/tmp/out}/$stage.tgz" -C "${OUT:-/tmp/out}" "$stage" && rm -rf "$R"
