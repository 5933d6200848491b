# Device call 2 (2026-12-06, twentieth session): the bound path at 256 bins (ALLOWED and the tuner's space widened:
# each doubling from 32 to 128 bins took 1.7-3 us off the selection alone at 64x32K and 1x1M in call 1's tune).
# (1) the bound count's GPU tests at 256 bins (6 forms x 2 shapes x 3 kinds, eager and in a graph); (2) bins_ab.py:
# the served settings against 256 bins in three count forms, end to end, alternated; (3) the GPU's top-k table
# re-tuned over the wider space (232 settings), then bench.topk with it.
# Predicted (before the run): (1) all pass; (2) against served: 64x32K -0.5 to -2 us (fewer admitted keys and
# candidates, the compaction's scans over 512 bins a little dearer), 1x1M -0.5 to -1.5, 64x128K and 16x256K level
# to -3 (rows of 32 at 256), 32x16K within 1 us, 128x8K (row: the control) level, prefill 4096x64K -1 to -3%,
# 2048x1M within 1%; every row exact; (3) if an H100: 64x32K ~1.19-1.20, 1x1M ~1.29-1.31, the rest as call 1;
# if an H200: 64x32K 1.27-1.31, 64x128K ~1.11, 1x1M 1.38-1.44, 128x8K ~1.40, prefill 1.35-1.42 / ~1.15.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py -k 256 > $OUT/call2_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_bins256/bins_ab.py --rounds 4 --out $OUT/call2_ab.json > $OUT/call2_ab.log 2>&1
echo "ab rc $?"; cat $OUT/call2_ab.log
timeout 260 python3 cli.py tune-topk --fresh --trials $OUT/call2_topk_trials.jsonl > $OUT/call2_tune_topk.log 2>&1
echo "tune rc $?"; tail -9 $OUT/call2_tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/call2_topk_table.json
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call2_bench_topk.log 2>&1
echo "bench rc $?"; tail -9 $OUT/call2_bench_topk.log
