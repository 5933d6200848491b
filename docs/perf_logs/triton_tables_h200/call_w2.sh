#!/usr/bin/env bash
# Working call 2: under Triton 3.8, the decode buckets' current 3.6 configs (the 20 small-bucket
# configs adopted on 2026-12-03 are not in the 3.8 store) re-timed into a copy of the 3.8 store
# and the 3.8 table emitted; then the 3.9 re-time resumed where call 1's time ran out (no-op if done).
. docs/perf_logs/triton_tables_h200/common.sh
[ -f /tmp/rt/r38.sqlite ] || cp db/triton-3.8/trials.sqlite /tmp/rt/r38.sqlite
run 3.8.0 ${R38_S:-240} retime38_decode.log cli.py retime --table nvidia_h200 --family decode_paged --top 1 --no-twins \
  --db /tmp/rt/r38.sqlite --out /tmp/rt/tables --quiet
tail -n 6 $OUT/retime38_decode.log
backup /tmp/rt/r38.sqlite $OUT/r38_trials.sqlite
if [ -n "${RESUME39:-}" ]; then
  run 3.9.0 $(( ${LIMIT:-570} - ($(date +%s) - S) )) retime39_decode_resumed.log cli.py retime --table nvidia_h200 \
    --family decode_paged --top 1 --db /tmp/rt/r39.sqlite --out /tmp/rt/tables --quiet
  tail -n 8 $OUT/retime39_decode_resumed.log
  backup /tmp/rt/r39.sqlite $OUT/r39_trials.sqlite
fi
tar -czf $OUT/tables.tgz -C /tmp/rt/tables nvidia_h200
t done
