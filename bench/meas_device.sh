#!/usr/bin/env bash
# Issue 13's device checks in one call on one H200 (the `device` tool's nvidia-h200), about
# 6 minutes: the persisting-L2 reset check (bench/l2_persist_check.py, < 60 s of work), then
# the A/A distribution of the l1 and dlrm suites for 240 s (bench/aa_device.py). Everything
# lands under $OUT/l2 and $OUT/aa (incremental JSON); the tables are printed at the end.
#
#   bash bench/meas_device.sh          (carry: .whl, the pydantic wheels for Python 3.12)
#
# AA_BUDGET_S sets the A/A budget (default 240). Never changes clocks or GPU modes.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
O="${OUT:-/tmp/out}"
mkdir -p "$O/l2" "$O/aa"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$O/gpus.csv" 2>&1
timeout 120 python3 bench/l2_persist_check.py --out "$O/l2" > "$O/l2/log.txt" 2>&1
echo "l2_persist_check exit $?" >> "$O/l2/log.txt"
timeout $(( ${AA_BUDGET_S:-240} + 150 )) python3 bench/aa_device.py --suite l1 --suite dlrm \
  --budget-s "${AA_BUDGET_S:-240}" --out "$O/aa" > "$O/aa/log.txt" 2>&1
echo "aa_device exit $?" >> "$O/aa/log.txt"
tail -n 12 "$O/l2/log.txt"
grep -A 12 '^| suite' "$O/aa/log.txt" || tail -n 20 "$O/aa/log.txt"
