#!/usr/bin/env bash
# Working call 1 (issue 30, item 2): the decode families re-timed under Triton 3.9 (each bucket's
# shipped 3.6 config and its head_sum twin), into a copy of the 3.9 store that holds its prefill
# trials; emitted to /tmp/rt/tables/nvidia_h200/triton-3.9/ (kept on the host for the serve call).
. docs/perf_logs/triton_tables_h200/common.sh
for v in 3.8.0 3.9.0; do TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/triton-$v:/tmp/site:$PWD python3 -c "import triton; print('import', triton.__version__)"; done; t unpacked
[ -f /tmp/rt/r39.sqlite ] || cp db/triton-3.9/trials.sqlite /tmp/rt/r39.sqlite
run 3.9.0 $(( ${LIMIT:-570} - ($(date +%s) - S) )) retime39_decode.log cli.py retime --table nvidia_h200 \
  --family decode_paged --top 1 --db /tmp/rt/r39.sqlite --out /tmp/rt/tables --quiet
tail -n 8 $OUT/retime39_decode.log
backup /tmp/rt/r39.sqlite $OUT/r39_trials.sqlite
[ -d /tmp/rt/tables/nvidia_h200 ] && tar -czf $OUT/tables39.tgz -C /tmp/rt/tables nvidia_h200
t done
