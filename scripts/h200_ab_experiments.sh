#!/usr/bin/env bash
# A/B the candidate templates in experiments/ against the shipped ones on one H200, before paying
# for a re-tune (scripts/gpu_template_ab.py: shipped config per bucket plus a few extra configs,
# each gated, then timed by graph replay on the same inputs). Logs: $OUT/ab/*.log.
# Usage (device tool): bash scripts/h200_ab_experiments.sh   [with .whl carried]
# ONLY=decode_scalar_page,decode_tma,prefill_paged_tma picks the candidates.
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/ab"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
ONLY=${ONLY:-decode_scalar_page,decode_tma,prefill_paged_tma}
DECODE_BUCKETS=${DECODE_BUCKETS:-64x8192:full,64x8192:quarter,64x32768:full,128x32768:full,64x131072:full,256x131072:full,8x1048576:full}
# bt64 configs, which the scalar page id and TMA apply to (the 64x8K winner is bt128)
DECODE_EXTRA='[{"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":3,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":4,"orient":"k_rows"}]'
PREFILL_EXTRA='[{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"}]'
for alt in ${ONLY//,/ }; do
  case $alt in
    prefill_*)
      step "$OUT/ab/$alt" ${PREFILL_LIMIT:-120} python3 scripts/gpu_template_ab.py --alt "experiments/$alt" --family prefill_paged \
        --buckets 4096x22528:full,4096x131072:full --configs "$PREFILL_EXTRA" --replays 5 ;;
    *)
      step "$OUT/ab/$alt" ${DECODE_LIMIT:-150} python3 scripts/gpu_template_ab.py --alt "experiments/$alt" \
        --buckets "$DECODE_BUCKETS" --configs "$DECODE_EXTRA" ;;
  esac
done
for alt in ${ONLY//,/ }; do
  echo "---- $alt"; sed -n '/^bucket /,$p' "$OUT/ab/$alt.log" | cut -c1-140; tail -n 3 "$OUT/ab/$alt.log" | grep -i error
done
cat "$SUMMARY"
