#!/usr/bin/env bash
# Chunked prefill (prefill_paged) under Triton 3.6/3.8/3.9: parts stashed by tree-less calls
# (/tmp/tparts9 a, b; /tmp/tparts8 both), 3.9's part c carried. One template_ab process per
# Triton: shipped tree vs tree + warp-aligned store (--alt experiments/prefill_paged_warp_store),
# and the chain (which now has the store) as an extra config; then retime prefill_paged under 3.8
# and 3.9 into fresh stores (the old '_hc' trials predate the store), emitted nowhere.
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
[ -d /tmp/triton-3.9.0/triton ] || { cp .t39/pc/* /tmp/tparts9/ && mkdir -p /tmp/triton-3.9.0 && cat /tmp/tparts9/t39part.* | xz -d | tar -x -C /tmp/triton-3.9.0 || t "3.9 unpack failed"; }
[ -d /tmp/triton-3.8.0/triton ] || { mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts8/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || t "3.8 unpack failed"; }
[ -d /tmp/site/optuna ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1; t unpacked
run() {  # run VERSION SECONDS LOG ARGS...
  local v=$1 s=$2 log=$3; shift 3; local P=/tmp/site:$PWD E=
  [ $v = 3.6.0 ] || { P=/tmp/triton-$v:$P; E=TRITON_BACKENDS_IN_TREE=1; }
  env $E PYTHONPATH=$P TRITON_CACHE_DIR=/tmp/tc-$v timeout $s python3 "$@" > $OUT/$log 2>&1; local rc=$?
  t "$log rc=$rc"; return $rc
}
C='[{"block_t":64,"tiles_per_program":64,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows","head_sum":"chain"}]'
for v in 3.6.0 3.8.0 3.9.0; do
  run $v ${AB_S:-100} ab_paged_$v.log -m bench.template_ab --family prefill_paged --buckets ${BUCKETS:-4096x22528:full} \
    --table nvidia_h200 --alt experiments/prefill_paged_warp_store --configs "$C"
  grep -v "^\s*$" $OUT/ab_paged_$v.log | tail -5
done
[ -f /tmp/r39/source.sqlite ] || { mkdir -p /tmp/r39 && xz -dc .c38/trials.sqlite.xz > /tmp/r39/source.sqlite; }
for v in 3.8.0 3.9.0; do
  left=$(( ${LIMIT:-585} - ($(date +%s) - S) )); [ $v = 3.8.0 ] && left=$(( left / 2 ))
  run $v $left retime_paged_$v.log cli.py retime --table nvidia_h200 --family prefill_paged \
    --source-db /tmp/r39/source.sqlite --db /tmp/paged_$v.sqlite --out /tmp/paged_tables_$v --quiet
  grep -v "FUSION\|warn" $OUT/retime_paged_$v.log | grep "b4096\|entries\|measured"
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" /tmp/paged_$v.sqlite $OUT/paged_$v.sqlite
done
t done
