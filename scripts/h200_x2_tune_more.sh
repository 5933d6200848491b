#!/usr/bin/env bash
# A second tuning pass on a host with two H200s: two `cli.py tune` commands at once, one per GPU,
# each starting from a copy of the committed store (db/trials.sqlite: configs measured before are
# answered from it, not re-measured) so the studies go on where the earlier pass stopped.
#   A_ARGS / B_ARGS: the tune arguments of lane A (GPU 0) / lane B (GPU 1), without --db;
#   LIMIT_S: each lane's hard limit (its --time-budget is 20 s less); EXTRA_B: a command lane B
#   runs after its tune (optional). Back here: `python cli.py merge-db <lane stores>`.
# Usage (device tool, nvidia-h200-x2): A_ARGS="..." B_ARGS="..." bash scripts/h200_x2_tune_more.sh
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/a" "$OUT/b"
LIMIT_S=${LIMIT_S:-260}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$SUMMARY"
cp db/trials.sqlite "$OUT/a/trials.sqlite"
cp db/trials.sqlite "$OUT/b/trials.sqlite"

lane() {  # name gpu args...
  local name=$1 gpu=$2; shift 2
  export CUDA_VISIBLE_DEVICES=$gpu
  # shellcheck disable=SC2086
  step "$OUT/$name/tune" "$LIMIT_S" python3 cli.py tune "$@" --time-budget $(( LIMIT_S - 20 )) --quiet \
    --db "$OUT/$name/trials.sqlite"
}

eval "A=($A_ARGS)"
eval "B=($B_ARGS)"
lane a 0 "${A[@]}" &
PA=$!
( lane b 1 "${B[@]}"; [ -n "${EXTRA_B:-}" ] && CUDA_VISIBLE_DEVICES=1 step "$OUT/b/extra" 120 bash -c "$EXTRA_B" ) &
PB=$!
wait $PA $PB
for f in a/tune b/tune b/extra; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 30 "$OUT/$f.log" | cut -c1-180; }
done
tar czf "$OUT/results.tgz" -C "$OUT" a b && rm -rf "$OUT/a" "$OUT/b"
cat "$SUMMARY"
