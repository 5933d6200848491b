# Device call 7 (2026-12-06, fifteenth session): the standing with today's defaults (the ragged epilogue on, the
# count by rows on for prefill blocks) and the prefill bucket re-tuned as served. On an H200: call 23 of
# topk_bound_h200 (the H200's top-k re-tune, bench, verify). On an H100: bench.topk --paths auto (call 4's part
# that did not run), then call 5 (tune-topk's prefill bucket timed as fp8_mqa_topk serves a block).
# Predicted (before the run), H100, logits + top-k over the logits: 64x32K ~1.28, 64x128K ~1.12, 1x1M ~1.34,
# 128x8K ~1.31, 4096x64K ~1.46 (call 4's probe: 1.463), 2048x1M ~1.20 (tiles serve its blocks: no epilogue);
# the tune: every trial exact, bound kept, ~60-80 us over the logits of a 256-row block.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
if echo "$GPU" | grep -q H200; then
  bash docs/perf_logs/topk_bound_h200/call23.sh
else
  timeout 200 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
  tail -10 $OUT/bench_topk.log
  bash docs/perf_logs/topk_prefill_blocks/call5.sh
fi
