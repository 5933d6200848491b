#!/usr/bin/env bash
# Tune every shipped family on a host with two H200s, in one device call, two lanes at once:
#   lane A (GPU 0): the whole fp8 decode table (next_n 1 and 2, batch 1..256 in powers of two,
#                   context 4K..1M) into a fresh store, timed: the issue-4 "whole table" figure;
#   lane B (GPU 1): the GPU tests (runaway candidates included), bf16 decode, fp8 prefill over
#                   ragged K, fp8 and bf16 chunked prefill, then the decode ceilings
#                   (scripts/gpu_ceilings.py), into a second store.
# Fresh stores and Optuna studies: nothing is answered from an earlier run's trials. Back here,
# `python cli.py merge-db` folds both into db/trials.sqlite. Logs and stores go to $OUT.
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_tune.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" "$OUT/a" "$OUT/b"
A_S=${A_S:-540}    # lane A's hard limit; its --time-budget is 60 s less
B_S=${B_S:-560}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader | tee -a "$SUMMARY"

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  step "$OUT/a/tune_fp8_decode" "$A_S" python3 cli.py tune --dtype fp8 --next-n 1,2 --batch pow2 --context 4K,8K,32K,128K,1M \
    --trials "${TRIALS:-12}" --ask-batch 4 --time-budget $(( A_S - 60 )) --quiet --db "$OUT/a/trials.sqlite"
}

lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  local db="$OUT/b/trials.sqlite" t0=$(date +%s)
  left() { echo $(( B_S - ($(date +%s) - t0) )); }
  step "$OUT/b/gpu_tests" 150 python3 -m pytest -q -s -m gpu tests/
  step "$OUT/b/tune_bf16_decode" 60 python3 cli.py tune --dtype bf16 --batch 1,8,64,256 --context 8K,32K,128K --trials 5 \
    --ask-batch 4 --time-budget 50 --quiet --db "$db"
  step "$OUT/b/tune_prefill_ragged" 60 python3 cli.py tune --family prefill_ragged --batch 4096 --context 16K,64K --trials 6 \
    --ask-batch 3 --time-budget 50 --quiet --db "$db"
  step "$OUT/b/tune_prefill_paged_fp8" 90 python3 cli.py tune --family prefill_paged --dtype fp8 --batch 4096 \
    --context 22528,131072 --trials 10 --ask-batch 5 --time-budget 80 --quiet --db "$db"
  step "$OUT/b/tune_prefill_paged_bf16" 60 python3 cli.py tune --family prefill_paged --dtype bf16 --batch 4096 \
    --context 22528,131072 --trials 5 --ask-batch 5 --time-budget 50 --quiet --db "$db"
  local rest=$(left)
  [ "$rest" -gt 40 ] && step "$OUT/b/ceilings" $(( rest - 10 )) python3 scripts/gpu_ceilings.py --replays 20 --out "$OUT/b/ceilings.json"
}

lane_a &
A=$!
lane_b &
B=$!
wait $A $B
for f in a/tune_fp8_decode b/gpu_tests b/tune_bf16_decode b/tune_prefill_ragged b/tune_prefill_paged_fp8 \
         b/tune_prefill_paged_bf16 b/ceilings; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 12 "$OUT/$f.log" | cut -c1-220; }
done
# what comes back from $OUT is at most 8 files: one archive of both lanes, plus the summary
tar czf "$OUT/results.tgz" -C "$OUT" a b && rm -rf "$OUT/a" "$OUT/b"
cat "$SUMMARY"
