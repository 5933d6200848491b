# Device call 1 (2026-12-06, twentieth session): the H200's standing with the code as committed (the early
# trigger, the inline count, 128 bins and the claimed slots in the space, none of them timed on an H200 yet),
# first with its seventeenth-session top-k table, then re-tuned over the whole default space (212 settings),
# then where the decode cases' time goes, kernel by kernel, with the new table.
# Predicted (before the run), logits + top-k over the logits alone:
#   old table: decode 64x32K 1.31-1.33, 64x128K ~1.12, 1x1M ~1.45, 128x8K ~1.41; prefill 4096x64K 1.38-1.45,
#              2048x1M ~1.15 (the trigger and the inline count take 1-2.5 us off the 7-26 us selections).
#   re-tuned:  64x32K 1.28-1.31 (128 bins), 1x1M 1.40-1.44 (the claims or 128 bins), 64x128K ~1.11, 128x8K ~1.40
#              (row, as it was), prefill 4096x64K 1.35-1.42 (its entry was never tuned on an H200; the H100's
#              took 32 bins), 2048x1M ~1.15. Every row exact. If so the bar still fails at 64x32K, 1x1M, 128x8K,
#              4096x64K on the H200, each by more than a re-tune gives.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
echo "bench before rc $?"; tail -9 $OUT/call1_bench_before.log
timeout 300 python3 cli.py tune-topk --fresh --trials $OUT/call1_topk_trials.jsonl > $OUT/call1_tune_topk.log 2>&1
echo "tune rc $?"; tail -12 $OUT/call1_tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call1_topk_table.json
timeout 150 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call1_bench_after.log 2>&1
echo "bench after rc $?"; tail -9 $OUT/call1_bench_after.log
timeout 90 python3 docs/perf_logs/topk_arena/decode_parts.py --out $OUT/call1_decode_parts.json > $OUT/call1_decode_parts.log 2>&1
echo "parts rc $?"; tail -30 $OUT/call1_decode_parts.log
