#!/usr/bin/env bash
# Re-tune, ship and bench the chunked-prefill family (prefill_paged) alone on one H200, after a
# change to its template: tune fp8 and bf16 (4096 query rows x 22,528 / 131,072-token tables)
# into the store, emit the H200 table, verify its prefill_paged entries, bench them against the
# baselines, and measure peak memory (scripts/gpu_chunked_prefill.py). Results: $OUT/results.tgz.
# Usage (device tool): bash scripts/h200_prefill_paged.sh   [with .whl carried]
# SEEDS: configs to try first (one JSON per line; default below); TRIALS_BF16=0 skips the bf16 tune;
# SKIP_VERIFY=1 skips `cli.py verify` (every trial is gated while it is tuned).
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/pp"
RID=${RID:-h200-pp-$(date +%Y%m%d-%H%M%S)}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
DEFAULT_SEEDS='{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":32,"num_warps":8,"num_stages":4,"block_m":4,"orient":"k_rows"}'
TRY=()
while IFS= read -r cfg; do [ -n "$cfg" ] && TRY+=(--try-config "$cfg"); done <<< "${SEEDS:-$DEFAULT_SEEDS}"
step "$OUT/pp/tune_fp8" $(( ${FP8_BUDGET:-95} + 15 )) python3 cli.py tune --family prefill_paged --dtype fp8 --batch 4096 --context 22528,131072 \
  --trials "${TRIALS_FP8:-10}" --ask-batch 5 --time-budget "${FP8_BUDGET:-95}" --quiet "${TRY[@]}"
[ "${TRIALS_BF16:-6}" != 0 ] && step "$OUT/pp/tune_bf16" 80 python3 cli.py tune --family prefill_paged --dtype bf16 --batch 4096 --context 22528,131072 \
  --trials "${TRIALS_BF16:-6}" --ask-batch 6 --time-budget 65 --quiet "${TRY[@]}"
step "$OUT/pp/emit" 40 python3 cli.py emit --gpu nvidia_h200
[ -z "${SKIP_VERIFY:-}" ] && step "$OUT/pp/verify" 90 python3 cli.py verify --gpu nvidia_h200 --no-defaults --family prefill_paged
for dt in fp8 bf16; do
  step "$OUT/pp/bench_$dt" 50 python3 cli.py bench --family prefill_paged --dtype $dt --batch 4096 --context 22528,131072 \
    --methods shipped,default,autotune,reference --candidates 3 --replays 5 --run-id "$RID" --out "$OUT/pp/bench.jsonl"
done
step "$OUT/pp/chunked_prefill" 60 python3 scripts/gpu_chunked_prefill.py --no-alternatives --replays 5
for f in tune_fp8 tune_bf16 verify bench_fp8 bench_bf16 chunked_prefill; do
  [ -f "$OUT/pp/$f.log" ] && { echo "---- $f"; tail -n 7 "$OUT/pp/$f.log" | cut -c1-200; }
done
cp db/trials.sqlite "$OUT/pp/"
tar czf "$OUT/results.tgz" -C "$OUT" pp && rm -rf "$OUT/pp"
cat "$SUMMARY"
