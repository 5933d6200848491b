# Device call 8 (2026-12-06, fifteenth session; call 7 got no machine): a prefill call's blocks sharing their
# selection's plan (_topk.SHARE_PLANS, _topk_select.SelectionPlan: the path, settings, key and buffers made once a
# row count, not once a block), then call 7 (bench.topk with today's defaults, the prefill bucket re-tuned as
# served). On an H200: call 23 of topk_bound_h200 instead (its top-k re-tune, bench, verify).
# Predicted (before the run), H100: the ragged, prefill and chunked GPU tests pass; the selection's host time a
# block of 164 rows 88 -> 30-45 us (call 6: 2204 us over 25 blocks with the epilogue on), so the 4096 x 64K call's
# host time ~3330 -> ~2100 us, its end to end level (not host-bound either way); 8192 x 8K (16 blocks of 512
# rows, ~40-60 us of device time a block) host-bound with a plan a block, and end to end 15-30% faster shared.
# bench.topk and the tune as call 7 predicted.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
if echo "$GPU" | grep -q H200; then
  bash docs/perf_logs/topk_bound_h200/call23.sh
  exit
fi
timeout 100 python3 -m pytest -q tests/test_topk_gpu.py -k "ragged or prefill or chunked or epilogue" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_prefill_blocks/host_profile.py --shapes 4096x65536,8192x8192 \
  --variants RAGGED_EPILOGUE=1+SHARE_PLANS=0,RAGGED_EPILOGUE=1+SHARE_PLANS=1 --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -5 $OUT/host_profile.log
timeout 200 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -10 $OUT/bench_topk.log
bash docs/perf_logs/topk_prefill_blocks/call5.sh
