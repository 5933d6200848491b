# Device call 4 (2026-12-05, ninth session, an H100 as call 3): call 2's re-tune after call 3, with the
# bound path's tight mapping in the space, then bench.topk with the table it writes (the H100's).
# Predicted (before the run), from call 3's segments_ab: bound with SEGMENTS kept at 64x131072 (1.16
# against the table's 1.24) and at 64x32768 if it times 2% ahead of rounds (1.29 against 1.33); the
# rounds path kept at 1x1048576 (bound 1.42-1.45 against 1.40); bound at the 256x65536 prefill block
# (4096x64K end to end 1.65 against 1.76).
set -x
timeout 300 python3 cli.py tune-topk --fresh --buckets 64x32768,64x131072,1x1048576,256x65536:prefill \
  --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -8 $OUT/tune_topk.log
find indexer_logits/tables -name topk.json -newer docs/perf_logs/topk_bound_h200/call4.sh -exec cp {} $OUT/topk_table.json \;
timeout 160 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
