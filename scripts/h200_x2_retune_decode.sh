#!/usr/bin/env bash
# Re-tune the decode table (fp8 next_n 1 and 2, bf16) and, with PREFILL=1, the chunked-prefill
# table after a change to their templates, on a host with two H200s, in one device call:
#   lane A (GPU 0): fp8 decode next_n=1 (batch 1..256 in powers of two, context 4K..1M), then bf16;
#   lane B (GPU 1): fp8 decode next_n=2 over the same buckets, then chunked prefill fp8 and bf16
#                   (PREFILL=1) or the GPU tests (GPU_TESTS=1).
# Fresh stores and studies (nothing answered from trials of the old template). Every study first
# tries the seed configs (SEEDS: one JSON config per line; default below: the old table's winners
# and the configs the A/B of the change favoured), then TPE. A pass without seeds came out worse
# than the table it replaced (docs/PERF.md, "Re-tuning the whole decode table").
# Back here: `python cli.py merge-db <lane stores>`.
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_retune_decode.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/a" "$OUT/b"
FP8_S=${FP8_S:-350}    # each lane's hard limit for its fp8 half; --time-budget is 30 s less
TRIALS=${TRIALS:-14}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$SUMMARY"
DEFAULT_SEEDS='{"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":3,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":1,"num_warps":8,"num_stages":1,"orient":"k_rows"}
{"block_t":128,"tiles_per_program":4,"num_warps":4,"num_stages":2,"orient":"k_rows"}
{"block_t":256,"tiles_per_program":1,"num_warps":4,"num_stages":1,"orient":"k_rows"}'
BF16_SEEDS='{"block_t":128,"tiles_per_program":4,"num_warps":4,"num_stages":3,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":3,"orient":"k_rows"}'
PREFILL_SEEDS='{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"}
{"block_t":64,"tiles_per_program":64,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows"}'
try_args() { while IFS= read -r cfg; do [ -n "$cfg" ] && printf '%s\0%s\0' --try-config "$cfg"; done <<< "$1"; }
mapfile -d '' TRY < <(try_args "${SEEDS:-$DEFAULT_SEEDS}")
mapfile -d '' TRY_BF16 < <(try_args "$BF16_SEEDS")
mapfile -d '' TRY_PREFILL < <(try_args "$PREFILL_SEEDS")

# SEED_TABLE=nvidia_h200: each bucket's shipped config goes first, before the seeds (tune --seed-table)
ST=(); [ -n "${SEED_TABLE:-}" ] && ST=(--seed-table "$SEED_TABLE")
FP8=(python3 cli.py tune --dtype fp8 --batch pow2 --context 4K,8K,32K,128K,1M --trials "$TRIALS" --ask-batch 4
     --time-budget $(( FP8_S - 30 )) --quiet "${ST[@]}" "${TRY[@]}")

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  step "$OUT/a/tune_fp8_n1" "$FP8_S" "${FP8[@]}" --next-n 1 --db "$OUT/a/trials.sqlite"
  step "$OUT/a/tune_bf16" 70 python3 cli.py tune --dtype bf16 --batch 1,8,64,256 --context 8K,32K,128K --trials 6 \
    --ask-batch 3 --time-budget 60 --quiet --db "$OUT/a/trials.sqlite" "${ST[@]}" "${TRY_BF16[@]}"
}

lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  step "$OUT/b/tune_fp8_n2" "$FP8_S" "${FP8[@]}" --next-n 2 --db "$OUT/b/trials.sqlite"
  if [ "${PREFILL:-0}" = 1 ]; then
    step "$OUT/b/tune_prefill_fp8" 110 python3 cli.py tune --family prefill_paged --dtype fp8 --batch 4096 \
      --context 22528,131072 --trials 10 --ask-batch 5 --time-budget 95 --quiet --db "$OUT/b/trials.sqlite" "${ST[@]}" "${TRY_PREFILL[@]}"
    step "$OUT/b/tune_prefill_bf16" 80 python3 cli.py tune --family prefill_paged --dtype bf16 --batch 4096 \
      --context 22528,131072 --trials 6 --ask-batch 6 --time-budget 65 --quiet --db "$OUT/b/trials.sqlite" "${ST[@]}" "${TRY_PREFILL[@]}"
  fi
  [ "${GPU_TESTS:-0}" = 1 ] && step "$OUT/b/gpu_tests" 120 python3 -m pytest -q -s -m gpu tests/
}

lane_a &
A=$!
lane_b &
B=$!
wait $A $B
for f in a/tune_fp8_n1 a/tune_bf16 b/tune_fp8_n2 b/tune_prefill_fp8 b/tune_prefill_bf16 b/gpu_tests; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 8 "$OUT/$f.log" | cut -c1-200; }
done
tar czf "$OUT/results.tgz" -C "$OUT" a b && rm -rf "$OUT/a" "$OUT/b"
cat "$SUMMARY"
