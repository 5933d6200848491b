#!/usr/bin/env bash
# Call 5: Triton 3.8 (parts in /tmp/tparts8) and 3.9 (a, b in /tmp/tparts9; c carried) unpacked; the
# ragged k_load A/B under 3.6, 3.8, 3.9 (alternating processes); retime of 3.9's prefill families
# (fresh store /tmp/r39) and of 3.8's ragged prefill (into the 3.8 store less its ragged rows),
# both emitted into the device tree for the serve call.
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
if [ ! -d /tmp/triton-3.9.0/triton ]; then
  cp .t39/pc/* /tmp/tparts9/ && mkdir -p /tmp/triton-3.9.0 && cat /tmp/tparts9/t39part.* | xz -d | tar -x -C /tmp/triton-3.9.0 || t "3.9 unpack failed"
fi
if [ ! -d /tmp/triton-3.8.0/triton ]; then
  mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts8/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || t "3.8 unpack failed"
fi
[ -d /tmp/site/optuna ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
for v in 3.8.0 3.9.0; do TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/triton-$v:/tmp/site:$PWD python3 -c "import triton; print('import', triton.__version__, triton.__file__)"; done; t unpacked
C='{"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows"'
R="--family prefill_ragged --buckets 4096x16384:causal,4096x65536:causal,1024x8192:causal --table nvidia_h200 --override k_load=tma,head_sum=chain --configs [$C,\"head_sum\":\"chain\"},$C,\"k_load\":\"tma\"}]"
run() {  # run VERSION SECONDS LOG ARGS...
  local v=$1 s=$2 log=$3; shift 3; local P=/tmp/site:$PWD E=
  [ $v = 3.6.0 ] || { P=/tmp/triton-$v:$P; E=TRITON_BACKENDS_IN_TREE=1; }
  env $E PYTHONPATH=$P TRITON_CACHE_DIR=/tmp/tc-$v timeout $s python3 "$@" > $OUT/$log 2>&1; local rc=$?
  t "$log rc=$rc"; return $rc
}
if [ -z "${NO_AB:-}" ]; then
  for v in 3.6.0 3.8.0 3.9.0; do run $v ${AB_S:-100} ab_kload_$v.log -m bench.template_ab $R; grep -v "^\s*$" $OUT/ab_kload_$v.log | tail -10; done
fi
mkdir -p /tmp/r39 && [ -f /tmp/r39/source.sqlite ] || xz -dc .c38/trials.sqlite.xz > /tmp/r39/source.sqlite
[ -f /tmp/r38.sqlite ] || cp .c38/t38_store.sqlite /tmp/r38.sqlite
run 3.8.0 ${R38_S:-120} retime38_ragged.log cli.py retime --table nvidia_h200 --family prefill_ragged \
  --source-db /tmp/r39/source.sqlite --db /tmp/r38.sqlite --out indexer_logits/tables --quiet; tail -6 $OUT/retime38_ragged.log
cp /tmp/r38.sqlite $OUT/r38_trials.sqlite
run 3.9.0 $(( ${LIMIT:-585} - ($(date +%s) - S) )) retime39_prefill.log cli.py retime --table nvidia_h200 --family prefill_ragged --family prefill_paged \
  --source-db /tmp/r39/source.sqlite --db /tmp/r39/trials.sqlite --out indexer_logits/tables --quiet; tail -8 $OUT/retime39_prefill.log
cp /tmp/r39/trials.sqlite $OUT/r39_trials.sqlite; t done
