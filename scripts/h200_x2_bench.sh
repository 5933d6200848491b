#!/usr/bin/env bash
# Verify and bench the committed H200 table on a host with two H200s, in one device call, then
# (time permitting) the one-worker vs two-worker tuning wall time (scripts/two_gpu_tune.sh).
#   lane A (GPU 0): verify the shipped table; bench fp8 decode next_n=1, every tuned bucket,
#                   full and quarter-full lengths, then the torch baselines at B=64 (the goals'
#                   buckets: 8K, 128K, 1M);
#   lane B (GPU 1): bench fp8 decode next_n=2 (full), bf16 decode, fp8 prefill over ragged K,
#                   fp8 and bf16 chunked prefill; the chunked-prefill peak-memory measurement.
# Optional: GPU_TESTS=1 (lane A: the GPU-marked tests), SKIP_VERIFY=1 (lane A: no `cli.py verify`,
# for a re-bench of a table verified before), PAGE_GAP=1 (lane B: the shipped kernels with
# and without the timing inputs' 64-byte page gap, scripts/gpu_page_stride.py).
# Both bench lanes tag their rows with one run id, into one results file per lane (merged back
# here into docs/results/bench_nvidia_h200.jsonl). Everything lands in $OUT/results.tgz.
# The torch baselines (full-width fallback, length-aware reference) cost up to seconds per call
# at 1M and took most of an earlier run's time (its decode benches ran out of time), so the
# decode sweeps time the kernels (METHODS) and the baselines run at B=64 only (BASELINES=0: none).
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_bench.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
T0=$(date +%s)
TOTAL_S=${TOTAL_S:-585}
mkdir -p "$OUT/a" "$OUT/b"
RID=${RID:-h200-$(date +%Y%m%d-%H%M%S)}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
echo "run id $RID" | tee -a "$SUMMARY"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$SUMMARY"
BATCH=${BATCH:-pow2}
CONTEXT=${CONTEXT:-4096,8192,32768,131072,1048576}
METHODS=${METHODS:-shipped,shipped_pdl,default,autotune}
COMMON=(--candidates "${CANDIDATES:-3}" --replays "${REPLAYS:-10}" --run-id "$RID")

batches() { [ "$BATCH" = pow2 ] && echo 1,2,4,8,16,32,64,128,256 || echo "$BATCH"; }

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  [ -z "${SKIP_VERIFY:-}" ] && step "$OUT/a/verify" 90 python3 cli.py verify --gpu nvidia_h200 --no-defaults
  step "$OUT/a/bench_fp8_n1" ${A_BENCH_S:-330} python3 cli.py bench --dtype fp8 --next-n 1 --batch "$(batches)" --context "$CONTEXT" \
    --methods "$METHODS" "${COMMON[@]}" --out "$OUT/a/bench.jsonl"
  if [ "${BASELINES:-1}" = 1 ]; then
    step "$OUT/a/bench_baselines_8k" 60 python3 cli.py bench --dtype fp8 --batch 64 --context 8192 \
      --methods shipped,shipped_pdl,torch_fullwidth,reference "${COMMON[@]}" --out "$OUT/a/bench.jsonl"
    step "$OUT/a/bench_baselines_long" 60 python3 cli.py bench --dtype fp8 --batch 64 --context 131072,1048576 --lens full \
      --methods shipped,shipped_pdl,torch_fullwidth "${COMMON[@]}" --out "$OUT/a/bench.jsonl"
  fi
  [ "${GPU_TESTS:-0}" = 1 ] && step "$OUT/a/gpu_tests" 120 python3 -m pytest -q -s -m gpu tests/
}

lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  local out="$OUT/b/bench.jsonl"
  # the one bucket the tuning call left untuned (its budget ran out), into a copy of the store
  [ -n "${RESUME_TUNE:-}" ] && step "$OUT/b/tune_resume" 60 python3 cli.py tune $RESUME_TUNE --trials 6 --ask-batch 3 --quiet \
    --db "$OUT/b/trials.sqlite"
  step "$OUT/b/bench_fp8_n2" ${B_BENCH_S:-200} python3 cli.py bench --dtype fp8 --next-n 2 --batch "$(batches)" --context "$CONTEXT" \
    --lens full --methods "$METHODS" "${COMMON[@]}" --out "$out"
  step "$OUT/b/bench_bf16" 60 python3 cli.py bench --dtype bf16 --batch 1,8,64,256 --context 8192,32768,131072 --lens full \
    --methods "$METHODS" "${COMMON[@]}" --out "$out"
  step "$OUT/b/bench_prefill" 45 python3 cli.py bench --family prefill_ragged --batch 4096 --context 16384,65536 \
    --methods shipped,default,autotune,reference --candidates 3 --replays 5 --run-id "$RID" --out "$out"
  for dt in fp8 bf16; do
    step "$OUT/b/bench_prefill_paged_$dt" 45 python3 cli.py bench --family prefill_paged --dtype $dt --batch 4096 \
      --context 22528,131072 --methods shipped,default,autotune,reference --candidates 3 --replays 5 --run-id "$RID" \
      --out "$out"
  done
  step "$OUT/b/chunked_prefill" 60 python3 scripts/gpu_chunked_prefill.py --no-alternatives --replays 5
  [ "${PAGE_GAP:-0}" = 1 ] && step "$OUT/b/page_stride" 90 python3 scripts/gpu_page_stride.py
}

[ -n "${RESUME_TUNE:-}" ] && cp db/trials.sqlite "$OUT/b/trials.sqlite"
lane_a &
A=$!
lane_b &
B=$!
wait $A $B
left=$(( TOTAL_S - ($(date +%s) - T0) ))
if [ "$left" -gt 150 ] && [ -z "${NO_TWO_GPU:-}" ]; then
  step "$OUT/a/two_gpu_tune" $(( left - 10 )) env OUT="$OUT/a" LIMIT_S=$(( (left - 20) * 3 / 5 )) BATCH=1,64,256 \
    CONTEXT=8K,32K TRIALS=6 ASK=3 bash scripts/two_gpu_tune.sh
  cp "$OUT/a/wall_times.txt" "$OUT/wall_times.txt" 2>/dev/null
else
  echo "== two_gpu_tune skipped: $left s left" | tee -a "$SUMMARY"
fi
for f in a/verify a/bench_fp8_n1 b/bench_fp8_n2 b/bench_bf16 b/bench_prefill b/bench_prefill_paged_fp8 \
         b/bench_prefill_paged_bf16 b/chunked_prefill a/gpu_tests b/page_stride a/two_gpu_tune; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 8 "$OUT/$f.log" | cut -c1-200; }
done
tar czf "$OUT/results.tgz" -C "$OUT" a b && rm -rf "$OUT/a" "$OUT/b"
cat "$SUMMARY" "$OUT/wall_times.txt" 2>/dev/null
