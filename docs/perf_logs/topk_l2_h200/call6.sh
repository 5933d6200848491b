# Device call 6: the final bin's candidates ranked 64 against 64 a step instead of one at a time.
# Predicted (written before the run): the row's last program of the compaction loses ~n_tie L2 round
# trips (~0.4 us each; n_tie ~8-20 on these inputs): selection 3-7 us less; logits + top-k at
# 64x32K 1.49 -> ~1.44, 64x128K 1.34 -> ~1.32, 1x1M 1.68 -> ~1.55; prefill within 1-2%.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_l2_h200/rank_ab.py > $OUT/rank_ab.log 2>&1
cat $OUT/rank_ab.log | tail -6
