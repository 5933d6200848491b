#!/usr/bin/env bash
# Working call 2 (after a second stash of the parts: the first try found a fresh machine, its /tmp
# gone): under Triton 3.8 the decode buckets' current 3.6 configs (the 20 small-bucket configs
# adopted on 2026-12-03 are not in the 3.8 store) re-timed into a copy of the 3.8 store, its table
# emitted into this tree; then issue 30's cases served under 3.6, 3.8 and 3.9 (the 3.9 table
# committed from call 1) in alternating processes.
. docs/perf_logs/triton_tables_h200/common.sh
for v in 3.8.0 3.9.0; do TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/triton-$v:/tmp/site:$PWD python3 -c "import triton; print('import', triton.__version__)"; done; t unpacked
[ -f /tmp/rt/r38.sqlite ] || cp db/triton-3.8/trials.sqlite /tmp/rt/r38.sqlite
run 3.8.0 ${R38_S:-200} retime38_decode.log cli.py retime --table nvidia_h200 --family decode_paged --top 1 --no-twins \
  --db /tmp/rt/r38.sqlite --out indexer_logits/tables --quiet
tail -n 5 $OUT/retime38_decode.log
backup /tmp/rt/r38.sqlite $OUT/r38_trials.sqlite
tar -czf $OUT/tables38.tgz -C indexer_logits/tables nvidia_h200/triton-3.8
PYTHONPATH=/tmp/site:$PWD python3 -m bench.triton_serve --other /tmp/triton-3.8.0 --other /tmp/triton-3.9.0 \
  --rounds 1 --case-s 60 --total-s $(( ${LIMIT:-585} - ($(date +%s) - S) )) --out $OUT/serve
t "serve rc=$?"; tar -czf $OUT/serve.tgz -C $OUT serve && rm -rf $OUT/serve; t done
