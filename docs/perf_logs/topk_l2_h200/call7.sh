# Device call 7: call 6's tiles of 64 took the compaction kernel from 48 to 219 registers
# (bench.topk_xcompile, sm_90), 8 programs an SM to 2, and lost 10-25%. Tiles of 32 and 8 keep it
# at 48 registers, no spills. Predicted: tiles of 32 against one at a time: 3-7 us less at the
# three decode shapes the four kernels serve (64x32K 111 -> 104-108 us), prefill within 1-2%;
# tiles of 8 between the two.
set -x
python3 docs/perf_logs/topk_l2_h200/rank_ab.py 32,8,0 > $OUT/rank_ab.log 2>&1
cat $OUT/rank_ab.log | tail -6
