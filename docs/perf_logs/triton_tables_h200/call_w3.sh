#!/usr/bin/env bash
# Working call 3: the new triton-3.8/ and triton-3.9/ tables (from /tmp/rt/tables) in place of the
# committed ones, then issue 30's cases served under 3.6, 3.8 and 3.9 in alternating processes.
. docs/perf_logs/triton_tables_h200/common.sh
for v in 3.8 3.9; do
  [ -f /tmp/rt/tables/nvidia_h200/triton-$v/dispatch.json ] && rm -rf indexer_logits/tables/nvidia_h200/triton-$v \
    && cp -r /tmp/rt/tables/nvidia_h200/triton-$v indexer_logits/tables/nvidia_h200/ && t "triton-$v table from /tmp/rt"
done
PYTHONPATH=/tmp/site:$PWD python3 -m bench.triton_serve --other /tmp/triton-3.8.0 --other /tmp/triton-3.9.0 \
  --rounds ${ROUNDS:-1} --case-s 60 --total-s ${SERVE_S:-420} --out $OUT/serve
t "serve rc=$?"; tar -czf $OUT/serve.tgz -C $OUT serve && rm -rf $OUT/serve; t done
