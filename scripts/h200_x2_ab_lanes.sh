#!/usr/bin/env bash
# Several A/Bs of candidate templates (scripts/gpu_template_ab.py) on a host with two H200s, in one
# device call: lane A (GPU 0) runs the argument strings A1, A2, ... in turn, lane B (GPU 1) B1,
# B2, ...; each string is the arguments of one gpu_template_ab.py run (--alt, --buckets, ...).
# Logs: $OUT/A1.log, $OUT/B1.log, ...; the comparison tables of all runs are printed last.
# Usage (device tool, nvidia-h200-x2):
#   A1='--alt experiments/x --buckets 64x8192:full' B1='--alt experiments/y --family prefill_paged ...' \
#   bash scripts/h200_x2_ab_lanes.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
lane() {  # lane LETTER GPU
  export CUDA_VISIBLE_DEVICES=$2
  local i=1 var
  while var="$1$i"; [ -n "${!var:-}" ]; do
    # shellcheck disable=SC2086 - each string is a list of arguments
    step "$OUT/$var" "${AB_S:-300}" python3 scripts/gpu_template_ab.py ${!var}
    i=$((i + 1))
  done
}
lane A 0 &
lane B 1 &
wait
for f in "$OUT"/[AB][0-9]*.log; do
  echo "---- $(basename "$f" .log): $(head -c 0 "$f")"; sed -n '/^bucket /,$p' "$f" | cut -c1-120
  grep -E '^REJECT|Error' "$f" | head -5
done
cat "$SUMMARY"
