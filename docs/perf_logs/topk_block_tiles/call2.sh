# Device call 2 (2026-12-07, twenty-sixth session; call 1 is topk_nofill's): tiles_probe.py at 4096 x 64K, the
# blocks' logits modules of 32 (served), 16 and 8 tiles a program. On an H200 first: its top-k standing and re-tune
# (topk_nofill/call1.sh's H200 branch). Last, the top-k GPU file's graph tests under KEEP_CAPTURED (one workspace a
# capture: topk_nofill), where no H200 came (its call has no time left for them).
# Predicted (before the run): the standalone logits of tp16 1-4% slower than tp32's, tp8 5-10%; in the blocks, a
# block's tail halves with each halving of a program (4-5 us a block at tp32, topk_drain call 1), 25 blocks: tp16
# level to 2% better than tp32 end to end (1.37 -> 1.34-1.38 of the logits), tp8 worse. All indices as served.
# The graph tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*)
  timeout 120 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/h200_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/h200_bench_before.log
  ;;
esac
timeout 200 python3 docs/perf_logs/topk_block_tiles/tiles_probe.py --rounds 4 --out $OUT/call2_tiles.json > $OUT/call2_tiles.log 2>&1
echo "tiles rc $?"; grep -v "Warn\|warn" $OUT/call2_tiles.log | tail -12
case "$GPU" in *H200*)
  timeout 300 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials_h200.jsonl > $OUT/h200_tune.log 2>&1
  echo "tune rc $?"; tail -12 $OUT/h200_tune.log; cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_h200.json
  ;;
esac
case "$GPU" in *H200*) ;; *)
  timeout 150 python3 -m pytest -q -x tests/test_topk_gpu.py -k "captured or graph or replay" > $OUT/call2_gpu_tests.log 2>&1
  echo "tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
  ;;
esac
