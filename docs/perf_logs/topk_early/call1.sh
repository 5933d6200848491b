# Device call 1 (2026-12-06, twenty-first session): the bound path's count and compaction with their independent
# loads first (COUNT_EARLY, which also loads round 1's range before its window's test, and COMPACT_EARLY: off by
# default, not in any table). (1) the bound count's GPU tests in the three early forms (prefix sums inline, rows,
# claims; each with the compaction's early loads: 18 tests, exact eagerly and in replayed graphs, the launches
# asserted to be the forms asked for); (2) early_ab.py: served against each early setting and both, and the row
# path's row held in registers (HOLD, 127 registers at 16 warps cross-compiled, no spill), end to end, alternated;
# (3) on an H200 only (its standing was last read in the seventeenth session): bench.topk before, a fresh tune-topk
# over the default space, bench.topk after; (4) on an H100 instead: the top-k and bound GPU files with all three on.
# Predicted (before the run): (1) all pass; (2) against served, us: count early -0.5 to -1.2 at 64x32K and 1x1M (one
# L2 round trip of ~4 a program, in round 1 and in the count); compaction early -0.5 to -1.2 there (two of ~7); both
# -1 to -2.2 at 64x32K, 1x1M and 32x16K; 64x128K and 16x256K level to -1 (16 and 8 steps a count program, the first
# a smaller share); 128x8K and 64x8K (row) level with the early settings, -1.5 to -3 us held (two of its three
# passes over the row from L2 gone, each a round trip and a block-wide reduction); the prefills within 1% (25 blocks
# x ~1.5 us of ~6.3 ms); every row exact. (4) all pass.
# (3) H200 only: 64x32K 1.27-1.31, 64x128K ~1.11, 1x1M 1.38-1.44, 128x8K ~1.40, prefill 1.35-1.42 / ~1.15.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py -k early > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 200 python3 docs/perf_logs/topk_early/early_ab.py --rounds 5 --out $OUT/call1_ab.json > $OUT/call1_ab.log 2>&1
echo "ab rc $?"; cat $OUT/call1_ab.log
case "$GPU" in *H200*) ;; *)
  # (4) an H100: the top-k and bound GPU files with all three on (flip_early.py), as defaults would run them
  PYTHONPATH=$PYTHONPATH:docs/perf_logs/topk_early timeout 220 python3 -m pytest -q -p no:cacheprovider -p flip_early \
    tests/test_topk_gpu.py tests/test_topk_bound_gpu.py > $OUT/call1_gpu_tests_flipped.log 2>&1
  echo "flipped tests rc $?"; tail -3 $OUT/call1_gpu_tests_flipped.log;;
esac
case "$GPU" in *H200*)
  timeout 100 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call1_bench_before.log
  timeout 260 python3 cli.py tune-topk --fresh --trials $OUT/call1_topk_trials.jsonl > $OUT/call1_tune_topk.log 2>&1
  echo "tune rc $?"; tail -12 $OUT/call1_tune_topk.log
  cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call1_topk_table_h200.json
  timeout 100 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call1_bench_after.log 2>&1
  echo "bench after rc $?"; tail -9 $OUT/call1_bench_after.log;;
esac
