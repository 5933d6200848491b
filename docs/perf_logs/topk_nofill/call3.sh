# Device call 3 (2026-12-07, twenty-sixth session). On an H200: its top-k standing with today's code, then its
# re-tune over the six default buckets (`tune-topk --fresh`); the table comes back under $OUT. Elsewhere: the
# standing by the bench (`bench.topk --paths auto`, one workspace fill a capture), then the GPU tests that capture
# graphs or touch the workspace (the workspace's, the fast path's, the runtime's, the bound file's graph tests;
# the top-k file's graph tests passed in call 2 of topk_block_tiles), and
# topk_block_tiles/tiles_probe.py again (its replica now _probe.py's).
# Predicted (before the run). H200: 64x32K 1.27-1.33, 64x128K ~1.10, 1x1M 1.38-1.45, 128x8K 1.30-1.36, 4096x64K
# 1.30-1.36, 2048x1M 1.12-1.16. H100: the bench as call 1's served column within 1% (64x32K ~1.20, 1x1M ~1.30,
# 128x8K ~1.25), prefill 4096x64K ~1.37, 2048x1M ~1.18; every test passes; tiles_probe as call 2 within 1%.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout 130 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call3_bench.log 2>&1
echo "bench rc $?"; tail -10 $OUT/call3_bench.log
case "$GPU" in
*H200*)
  timeout 300 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials_h200.jsonl > $OUT/h200_tune.log 2>&1
  echo "tune rc $?"; tail -12 $OUT/h200_tune.log; cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_h200.json
  timeout 120 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/h200_bench_after.log 2>&1
  echo "bench after rc $?"; tail -10 $OUT/h200_bench_after.log
  ;;
*)
  timeout 150 python3 -m pytest -q tests/test_topk_workspace.py tests/test_fastpath_gpu.py tests/test_runtime.py \
    -m gpu > $OUT/call3_gpu_tests.log 2>&1
  echo "tests rc $?"; tail -4 $OUT/call3_gpu_tests.log
  timeout 60 python3 -m pytest -q tests/test_topk_bound_gpu.py -k "graph or captur or replay" > $OUT/call3_bound_tests.log 2>&1
  echo "bound tests rc $?"; tail -3 $OUT/call3_bound_tests.log
  # the probe again after its replica and checks moved to topk_drain/_probe.py (ragged_replica, checked_and_timed)
  timeout 90 python3 docs/perf_logs/topk_block_tiles/tiles_probe.py --rounds 1 > $OUT/call3_tiles.log 2>&1
  echo "tiles rc $?"; grep -v "Warn\|warn" $OUT/call3_tiles.log | tail -9
  ;;
esac
