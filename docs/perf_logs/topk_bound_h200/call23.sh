# Device call 23 (2026-12-06, fourteenth session): call 15 at last if an H200 is lent (its top-k table predates
# the bound path): tune-topk --fresh over the six default buckets (lanes in every bound bucket's space now),
# bench.topk --paths auto with the table just written, verify-topk. On an H100 instead: call 3 of
# topk_prefill_blocks (the GPU tests and bench.topk with the count by rows on for prefill blocks by default).
# Predicted (before the run), logits + top-k over the logits, H200: 64x32K ~1.36 (bound; 1.46 with the old
# rounds entry), 64x128K ~1.15, 1x1M ~1.50, 128x8K ~1.42 (row), 4096x64K ~1.50, 2048x1M ~1.18; H100:
# call 3's prediction (64x32K ~1.28, 64x128K ~1.12, 1x1M ~1.34, 128x8K ~1.31, 4096x64K ~1.48, 2048x1M ~1.20).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
if echo "$GPU" | grep -q H200; then
  timeout 330 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
  tail -9 $OUT/tune_topk.log
  cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
  timeout 150 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
  tail -9 $OUT/bench_topk.log
  timeout 60 python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
  tail -8 $OUT/verify_topk.log
else
  bash docs/perf_logs/topk_prefill_blocks/call3.sh
fi
