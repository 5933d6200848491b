# Device call 6 (2026-12-07, twenty-fourth session): on a fresh machine, in case an H200 comes: its standing with
# today's code (the votes served by the model, its table of the seventeenth session otherwise), its top-k table
# re-tuned over today's space (244 settings), the standing after; the re-tuned table copied out for committing.
# On an H100 nothing runs (calls 1-5 read the H100).
# Predicted (before the run), an H200: before 64x32K 1.27-1.33, 64x128K ~1.10, 1x1M 1.40-1.47, 128x8K 1.30-1.36,
# 4096x64K 1.30-1.36, 2048x1M 1.12-1.16; the re-tune keeps the bound path at the bound buckets and takes the votes
# at the prefill bucket; after it the same within 0.02 (4096x64K 0-3% less).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call6_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call6_bench_before.log
  timeout 300 python3 cli.py tune-topk --fresh --trials $OUT/call6_topk_trials.jsonl > $OUT/call6_tune_topk.log 2>&1
  echo "tune rc $?"; tail -9 $OUT/call6_tune_topk.log
  cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call6_topk_table.json
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call6_bench_after.log 2>&1
  echo "bench after rc $?"; tail -9 $OUT/call6_bench_after.log;;
esac
