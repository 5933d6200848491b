#!/usr/bin/env bash
# Call 6 (after tx_work.sh, while warm): retime decode under 3.9 (the 3.8 table's choices, --top 1
# --no-twins) into /tmp/r39, emitted into the device tree; then the served tables under 3.6, 3.8
# and 3.9 in alternating processes (bench.triton_serve).
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
export PYTHONUNBUFFERED=1
[ -d /tmp/triton-3.9.0/triton ] && [ -d /tmp/triton-3.8.0/triton ] || { t "no 3.8/3.9 on this machine"; exit 1; }
if [ -z "${SKIP_DECODE:-}" ]; then
TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/triton-3.9.0:/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/tc-3.9.0 timeout ${DEC_S:-240} python3 cli.py retime \
  --table indexer_logits/tables/nvidia_h200/triton-3.8/dispatch.json --family decode_paged --top 1 --no-twins \
  --source-db /tmp/r39/source.sqlite --db /tmp/r39/trials.sqlite --out indexer_logits/tables --quiet > $OUT/retime39_decode.log 2>&1
t "retime 3.9 decode rc=$?"; tail -6 $OUT/retime39_decode.log
cp /tmp/r39/trials.sqlite $OUT/r39_trials.sqlite
fi
ls indexer_logits/tables/nvidia_h200/
PYTHONPATH=/tmp/site:$PWD python3 -m bench.triton_serve --other /tmp/triton-3.8.0 --other /tmp/triton-3.9.0 \
  --rounds ${ROUNDS:-1} --case-s 100 --total-s $(( ${LIMIT:-585} - ($(date +%s) - S) - 10 )) --out $OUT/serve
t "serve rc=$?"; tar -czf $OUT/serve.tgz -C $OUT serve && rm -rf $OUT/serve; t done
