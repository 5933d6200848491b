#!/usr/bin/env bash
# After a template change that leaves the compiled kernels alone (a launcher fix, say): re-time the
# configs the committed H200 table ships, under the new template, then emit the table from those
# trials and bench it, on a host with two H200s, in one device call. A template change makes every
# stored trial of its family stale (emit takes trials of the current template only); this keeps the
# table's choices and measures them again instead of searching again.
#   lane A (GPU 0): fp8 decode next_n=1, bf16 decode, chunked prefill fp8 and bf16;
#   lane B (GPU 1): fp8 decode next_n=2.
# Each: `tune --seed-table nvidia_h200 --trials 1` on a copy of db/trials.sqlite. Then merge-db,
# emit and scripts/h200_x2_bench.sh (NO_TWO_GPU=1 GPU_TESTS=1 PAGE_GAP=1) on the new table.
# Back here: `python cli.py merge-db` the two lane stores and `python cli.py emit --gpu nvidia_h200`
# (deterministic: the same bytes as the table benched here).
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_retime_and_bench.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/a" "$OUT/b" "$OUT/bench"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
cp db/trials.sqlite "$OUT/a/trials.sqlite"
cp db/trials.sqlite "$OUT/b/trials.sqlite"
RETIME=(--trials 1 --ask-batch 4 --seed-table nvidia_h200 --quiet)

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  step "$OUT/a/retime_fp8_n1" 200 python3 cli.py tune --dtype fp8 --next-n 1 --batch pow2 --context 4K,8K,32K,128K,1M \
    "${RETIME[@]}" --db "$OUT/a/trials.sqlite"
  step "$OUT/a/retime_bf16" 80 python3 cli.py tune --dtype bf16 --batch 1,8,64,256 --context 8K,32K,128K \
    "${RETIME[@]}" --db "$OUT/a/trials.sqlite"
  for dt in fp8 bf16; do
    step "$OUT/a/retime_prefill_$dt" 60 python3 cli.py tune --family prefill_paged --dtype $dt --batch 4096 \
      --context 22528,131072 "${RETIME[@]}" --db "$OUT/a/trials.sqlite"
  done
}

lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  step "$OUT/b/retime_fp8_n2" 200 python3 cli.py tune --dtype fp8 --next-n 2 --batch pow2 --context 4K,8K,32K,128K,1M \
    "${RETIME[@]}" --db "$OUT/b/trials.sqlite"
}

lane_a &
A=$!
lane_b &
B=$!
wait $A $B
step "$OUT/merge" 60 python3 cli.py merge-db "$OUT/a/trials.sqlite" "$OUT/b/trials.sqlite"
step "$OUT/emit" 120 python3 cli.py emit --gpu nvidia_h200
cp -r kernels_generated/nvidia_h200 "$OUT/table"
OUT="$OUT/bench" NO_TWO_GPU=1 TOTAL_S=${BENCH_S:-330} GPU_TESTS=1 PAGE_GAP=1 bash scripts/h200_x2_bench.sh > "$OUT/bench.log" 2>&1
for f in a/retime_fp8_n1 a/retime_bf16 a/retime_prefill_fp8 a/retime_prefill_bf16 b/retime_fp8_n2 emit; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 4 "$OUT/$f.log" | cut -c1-200; }
done
tail -n 40 "$OUT/bench.log"
rm -f "$OUT"/a/optuna.sqlite "$OUT"/b/optuna.sqlite
tar czf "$OUT/results.tgz" -C "$OUT" a b table bench bench.log && rm -rf "$OUT/a" "$OUT/b" "$OUT/table" "$OUT/bench"
cat "$SUMMARY"
