#!/usr/bin/env bash
# After a decode template change: re-time the configs the committed H200 table ships, under the
# new template, on a host with two H200s, in one device call (the bench comes in a second call:
# scripts/h200_x2_bench.sh; scripts/h200_x2_retime_and_bench.sh does both). Each lane runs
# `tune --seed-table nvidia_h200 --trials 1` on a copy of db/trials.sqlite, so the table keeps its
# choices and has them measured again, not searched again.
#   lane A (GPU 0): fp8 decode next_n=1;  lane B (GPU 1): fp8 decode next_n=2, then bf16 decode.
#   PREFILL=1: chunked prefill too, fp8 after lane A's decode, bf16 after lane B's.
# Back here: `python cli.py merge-db $OUT/a/trials.sqlite $OUT/b/trials.sqlite` and
# `python cli.py emit --gpu nvidia_h200`.
# Usage (device tool, nvidia-h200-x2): bash scripts/h200_x2_retime_decode.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/a" "$OUT/b"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
cp db/trials.sqlite "$OUT/a/trials.sqlite"
cp db/trials.sqlite "$OUT/b/trials.sqlite"
RETIME=(--trials 1 --ask-batch 4 --seed-table nvidia_h200 --quiet)
LANE_S=${LANE_S:-260}
T0=$(date +%s)

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  step "$OUT/a/retime_fp8_n1" "$LANE_S" python3 cli.py tune --dtype fp8 --next-n 1 --batch pow2 \
    --context 4K,8K,32K,128K,1M "${RETIME[@]}" --db "$OUT/a/trials.sqlite"
  retime_prefill a fp8
}

retime_prefill() {  # LANE DTYPE: chunked prefill's table entries, with PREFILL=1
  [ "${PREFILL:-0}" = 1 ] || return 0
  step "$OUT/$1/retime_prefill_$2" 60 python3 cli.py tune --family prefill_paged --dtype "$2" --batch 4096 \
    --context 22528,131072 "${RETIME[@]}" --db "$OUT/$1/trials.sqlite"
}

lane_b() {
  export CUDA_VISIBLE_DEVICES=1
  step "$OUT/b/retime_fp8_n2" $(( LANE_S * 3 / 4 )) python3 cli.py tune --dtype fp8 --next-n 2 --batch pow2 \
    --context 4K,8K,32K,128K,1M "${RETIME[@]}" --db "$OUT/b/trials.sqlite"
  step "$OUT/b/retime_bf16" $(( LANE_S - ($(date +%s) - T0) )) python3 cli.py tune --dtype bf16 --batch 1,8,64,256 \
    --context 8K,32K,128K "${RETIME[@]}" --db "$OUT/b/trials.sqlite"
  retime_prefill b bf16
}

lane_a &
A=$!
lane_b &
B=$!
wait $A $B
rm -f "$OUT"/a/optuna.sqlite "$OUT"/b/optuna.sqlite
for f in a/retime_fp8_n1 a/retime_prefill_fp8 b/retime_fp8_n2 b/retime_bf16 b/retime_prefill_bf16; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 4 "$OUT/$f.log" | cut -c1-200; }
done
cat "$SUMMARY"
