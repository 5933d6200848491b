#!/usr/bin/env bash
# One worker vs two on the same small table, on a host with (at least) two GPUs: the same
# `tune` command, first with --workers 1 (GPU 0), then with --workers 2 (GPUs 0 and 1), each on a
# fresh trial store and a fresh Triton cache (so the second run does not inherit compiled
# kernels), no time budget (both do the same number of trials). Prints both wall times.
# Usage (device tool, nvidia-h200-x2): bash scripts/two_gpu_tune.sh   [with .whl carried]
# Knobs: BATCH, CONTEXT, TRIALS (per bucket), ASK (ask batch), LIMIT_S (per run), PY, EXTRA (more
# tune options; a CPU dry run: EXTRA="--interpret --heads 16 --head-dim 32 --page-size 32" BATCH=1,2
# CONTEXT=64 TRIALS=2 NO_WHL=1).
set -u
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
source "$(dirname "$0")/gpu_host.sh"
if [ -d .whl ] && [ -z "${NO_WHL:-}" ]; then  # the device host has torch and triton; the rest comes as wheels
  install_wheels || exit 1
fi
OUT=${OUT:-/tmp/out}
WORK=$(mktemp -d)
mkdir -p "$OUT"
TABLE=(--dtype fp8 --next-n 1 --batch "${BATCH:-1,64,256}" --context "${CONTEXT:-8K,32K,128K}"
       --trials "${TRIALS:-8}" --ask-batch "${ASK:-4}" --quiet ${EXTRA:-})
nvidia-smi --query-gpu=index,name,clocks.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"

tune() {  # name workers: one timed run; prints "name: ... wall N s"
  local name=$1 workers=$2
  mkdir -p "$WORK/$name"
  local t0 t1 rc
  t0=$(date +%s.%N)
  TRITON_CACHE_DIR="$WORK/$name/triton" timeout "${LIMIT_S:-280}" \
    $PY cli.py tune "${TABLE[@]}" --workers "$workers" --db "$WORK/$name/trials.sqlite" > "$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local rows
  rows=$($PY -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute(\"select count(*) from trials where status='ok'\").fetchone()[0])" \
    "$WORK/$name/trials.sqlite" 2>/dev/null || echo "?")
  printf '%s: --workers %s rc=%s, %s trials timed, wall %s s\n' "$name" "$workers" "$rc" "$rows" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
    | tee -a "$OUT/wall_times.txt"
}

: > "$OUT/wall_times.txt"
CUDA_VISIBLE_DEVICES=0 tune one_worker 1
CUDA_VISIBLE_DEVICES=0,1 tune two_workers 2
for name in one_worker two_workers; do echo "---- $name (tail)"; tail -n 14 "$OUT/$name.log"; done
echo "---- wall times (${TABLE[*]})"
cat "$OUT/wall_times.txt"
rm -rf "$WORK"
