#!/usr/bin/env bash
# Throughput and the Ray executor on the GPU machine: the dev dataset, the reference as its own
# candidate, first workload(s) of each problem, in three steps (about 6 minutes on one H200):
#   1. probes: an instrumented local run of 3 small problems x 3 workloads (parent-side wall
#      probes: truth, reference, inputs, guard checks, per-op requests; and whether a worker's
#      second workload pays the CUPTI first session again)       -> $OUT/throughput/probes*
#   2. local: `solbench run` on GPU 0                            -> $OUT/throughput/local*
#   3. ray: `solbench run --executor ray`, one worker per GPU of the host; KILL_AFTER_S=S kills
#      one worker's actor process S seconds in (issue 15 on 2+ GPUs) -> $OUT/throughput/ray*
#   then bench/executor_compare.py: same keys, same verdicts (same --seed), one NVML UUID per
#   worker and none shared, retried pairs, wall ratio            -> $OUT/throughput/compare.json
#
# Before (on the coordinator's machine, from the repo root): the wheels the GPU machine lacks,
# with Ray slimmed to fit the 64 MiB carry limit:
#   ../shared/scripts/device-wheels pydantic pydantic-core annotated-types typing-inspection \
#     typing-extensions ray==2.60.0 msgpack protobuf jsonschema jsonschema-specifications \
#     referencing rpds-py attrs pyyaml requests idna urllib3 certifi charset-normalizer
#   python3 bench/slim_ray_wheel.py .whl/ray-2.60.0-*.whl && du -sh .whl
# Run (device tool, carry [".whl"]):  bash bench/throughput_device.sh
# Knobs: N_PROBLEMS (10), SKIP (globs), PROBE_S (100; 0 skips step 1), LOCAL_S (120),
#   RAY_S (150), KILL_AFTER_S (unset), AB_S (0: no spare-pool A/B; e.g. 240), AB_PROBLEMS (4),
#   AB_COPIES (8),
#   DATA (../shared/datasets/sol-execbench-dev), DEVICE (cuda; cpu for a dry run with
#   DATA=l1 ONLY='relu_*' EXTRA='--tag cpu').
set -uo pipefail
T0=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >/dev/null 2>&1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
export PYTHONUNBUFFERED=1
DATA="${DATA:-../shared/datasets/sol-execbench-dev}"
DEVICE="${DEVICE:-cuda}"
N="${N_PROBLEMS:-10}"
SKIP="${SKIP:-*nvfp4*,*backward*}"
ONLY="${ONLY:-}"
EXTRA="${EXTRA:-}"
R="${OUT:-/tmp/out}/throughput"
mkdir -p "$R"
{ python3 -c "import ray, sys; print('ray', ray.__version__, 'python', sys.version.split()[0])"
  nvidia-smi -L 2>/dev/null; } > "$R/env.txt" 2>&1
echo "setup $(( $(date +%s) - T0 )) s: $(tr '\n' ';' < "$R/env.txt")"

common=(--live "$DATA" --device "$DEVICE" --seed 0x5eed --skip "$SKIP")
[ -n "$ONLY" ] && common+=(--only "$ONLY")
# shellcheck disable=SC2206
extra=($EXTRA)

# 1. probes (in-process, so bounded by timeout; the traces made before a cut are kept)
P_ONLY="${P_ONLY:-004_gemm_n128_k2048,024_rmsnorm_h2048,025_video_latent_gelu_activation}"
if [ "${PROBE_S:-100}" -gt 0 ]; then  # PROBE_S=0: no probes (e.g. the multi-GPU proof)
  timeout "${PROBE_S:-100}" python3 bench/throughput.py --live "$DATA" --device "$DEVICE" --seed 0x5eed \
    --only "${ONLY:-$P_ONLY}" --max-workloads 3 --instrument "${extra[@]}" --out "$R/probes" \
    > "$R/probes.log" 2>&1
  [ -f "$R/probes.md" ] || python3 bench/throughput.py "$R/probes_run" --out "$R/probes" >> "$R/probes.log" 2>&1
  echo "probes done at $(( $(date +%s) - T0 )) s"
fi

# 2. local, one GPU
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" python3 bench/throughput.py "${common[@]}" \
  --max-problems "$N" --max-workloads 1 --budget-s "${LOCAL_S:-120}" "${extra[@]}" --out "$R/local" \
  > "$R/local.log" 2>&1
echo "local done at $(( $(date +%s) - T0 )) s"

# 2b. optional (AB_S=seconds): the spare-worker pool before / after, AB_PROBLEMS problems x
#     AB_COPIES copies of their first workload, one pair each (bench/throughput_ab.py)
if [ "${AB_S:-0}" -gt 0 ]; then
  CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" timeout "$AB_S" python3 bench/throughput_ab.py \
    --live "$DATA" --device "$DEVICE" --seed 0x5eed --skip "$SKIP" ${ONLY:+--only "$ONLY"} \
    --max-problems "${AB_PROBLEMS:-4}" --copies "${AB_COPIES:-8}" --reps 1 \
    --budget-s "$(( AB_S / 2 ))" --out "$R/ab" > "$R/ab.log" 2>&1
  echo "spares A/B done at $(( $(date +%s) - T0 )) s"
fi

# 3. ray, one worker per GPU; optionally kill one worker mid-run
if [ -n "${KILL_AFTER_S:-}" ]; then
  # from KILL_AFTER_S on, the first actor process seen evaluating a pair (Ray titles it
  # "ray::EvalWorker.evaluate"), for up to 120 s
  ( sleep "$KILL_AFTER_S"
    for _ in $(seq 600); do
      pid=$(pgrep -f '^ray::EvalWorker.evaluate' | head -1)
      if [ -n "$pid" ]; then kill -9 "$pid" && echo "killed Ray worker pid $pid ($(date +%T))"; break; fi
      sleep 0.2
    done ) > "$R/kill.log" 2>&1 &
fi
python3 bench/throughput.py "${common[@]}" --executor ray --max-problems "$N" --max-workloads 1 \
  --budget-s "${RAY_S:-150}" "${extra[@]}" --out "$R/ray" > "$R/ray.log" 2>&1
wait
echo "ray done at $(( $(date +%s) - T0 )) s"

python3 bench/executor_compare.py "$R/local_run/results.jsonl" "$R/ray_run/results.jsonl" \
  --out "$R/compare" --wall "$R/local.json" "$R/ray.json" > "$R/compare.log" 2>&1
rm -rf "$R"/*_run/solutions
for f in env.txt probes.md local.md ab.md ray.md compare.log kill.log; do
  [ -f "$R/$f" ] && { echo "--- $f"; cat "$R/$f"; }
done
tail -3 "$R"/local_run/run.log "$R"/ray_run/run.log 2>/dev/null
echo "== done after $(( $(date +%s) - T0 )) s"
