#!/usr/bin/env bash
# After a template change that leaves the compiled kernels alone (a launcher fix, say): re-time the
# configs the committed H200 table ships, under the new template, then emit the table from those
# trials and bench it, on a host with two H200s, in one device call. A template change makes every
# stored trial of its family stale (emit takes trials of the current template only); this keeps the
# table's choices and measures them again instead of searching again.
# The re-time is scripts/h200_x2_retime_decode.sh with PREFILL=1 (decode fp8 next_n=1, then chunked
# prefill fp8, on GPU 0; decode fp8 next_n=2, bf16, then chunked prefill bf16, on GPU 1), each lane
# on a copy of db/trials.sqlite; PREFILL=0 re-times decode only (a change to the decode template).
# Then merge-db, emit and scripts/h200_x2_bench.sh (NO_TWO_GPU=1 GPU_TESTS=1 PAGE_GAP=1) on the new
# table.
# Back here: `python cli.py merge-db` the two lane stores and `python cli.py emit --gpu nvidia_h200`
# (deterministic: the same bytes as the table benched here).
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_retime_and_bench.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
SUMMARY="$OUT/summary.txt"
mkdir -p "$OUT/bench"
OUT="$OUT" PREFILL=${PREFILL:-1} LANE_S=${LANE_S:-260} bash "$(dirname "$0")/h200_x2_retime_decode.sh" > "$OUT/retime.log" 2>&1
step "$OUT/merge" 60 python3 cli.py merge-db "$OUT/a/trials.sqlite" "$OUT/b/trials.sqlite"
step "$OUT/emit" 120 python3 cli.py emit --gpu nvidia_h200
cp -r indexer_logits/tables/nvidia_h200 "$OUT/table"
OUT="$OUT/bench" NO_TWO_GPU=1 TOTAL_S=${BENCH_S:-330} GPU_TESTS=1 PAGE_GAP=1 bash scripts/h200_x2_bench.sh > "$OUT/bench.log" 2>&1
tail -n 30 "$OUT/retime.log"
[ -f "$OUT/emit.log" ] && { echo "---- emit (tail)"; tail -n 4 "$OUT/emit.log" | cut -c1-200; }
tail -n 40 "$OUT/bench.log"
tar czf "$OUT/results.tgz" -C "$OUT" a b table bench bench.log retime.log && rm -rf "$OUT/a" "$OUT/b" "$OUT/table" "$OUT/bench"
cat "$SUMMARY"
