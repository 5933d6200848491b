#!/usr/bin/env bash
# One call on a host with two H200s: A/B a decode candidate from experiments/ against the current
# template on the shipped configs plus the configs in EXTRA (GPU 0), while GPU 1 either A/Bs a
# second candidate (ALT_B) on the same buckets and configs, or measures the decode ceilings of the
# shipped table (scripts/gpu_ceilings.py) and runs the GPU-marked tests.
# Usage (device tool, nvidia-h200-x2): ALT=decode_even_split [ALT_B=...] bash scripts/h200_x2_ab_ceilings.sh
#   [with .whl carried; GPU_TESTS=0 skips the tests]. Logs: $OUT/ab.log, $OUT/ab_b.log or $OUT/ceilings.{log,json} and $OUT/gpu_tests.log.
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
ALT=${ALT:-decode_even_split}
BUCKETS=${BUCKETS:-64x8192:full,64x8192:quarter,256x8192:quarter,64x32768:quarter,64x32768:full,64x131072:full,8x32768:full}
# k_rows bt64 (bt32) configs at several pipeline depths: bulk copies make a stage 8 KB of shared memory
EXTRA=${EXTRA:-'[{"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":4,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":5,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":6,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":5,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":6,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":8,"orient":"k_rows"},
 {"block_t":32,"tiles_per_program":32,"num_warps":4,"num_stages":6,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":4,"num_warps":4,"num_stages":4,"orient":"k_rows"}]'}
(
  export CUDA_VISIBLE_DEVICES=0
  step "$OUT/ab" ${AB_S:-420} python3 scripts/gpu_template_ab.py --alt "experiments/$ALT" --buckets "$BUCKETS" \
    --configs "$EXTRA" --replays "${REPLAYS:-20}"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  if [ -n "${ALT_B:-}" ]; then
    step "$OUT/ab_b" ${AB_S:-420} python3 scripts/gpu_template_ab.py --alt "experiments/$ALT_B" --buckets "$BUCKETS" \
      --configs "$EXTRA" --replays "${REPLAYS:-20}"
  else
    step "$OUT/ceilings" ${CEIL_S:-300} python3 scripts/gpu_ceilings.py --replays 20 --out "$OUT/ceilings.json"
    [ "${GPU_TESTS:-1}" = 1 ] && step "$OUT/gpu_tests" 120 python3 -m pytest -q -s -m gpu tests/
  fi
) &
wait
echo "---- $ALT"; sed -n '/^bucket /,$p' "$OUT/ab.log" | cut -c1-120
if [ -n "${ALT_B:-}" ]; then
  echo "---- $ALT_B"; sed -n '/^bucket /,$p' "$OUT/ab_b.log" | cut -c1-120
else
  sed -n '/^bucket lens/,$p' "$OUT/ceilings.log"
  [ -f "$OUT/gpu_tests.log" ] && tail -n 2 "$OUT/gpu_tests.log"
fi
cat "$SUMMARY"
