# Device call 6 (2026-12-05, twelfth session; an H100): the keys' count by rows of 32 keys (COUNT_LANES: each
# row's prefix sum a warp's shuffles, a sub-segment a row, atomics and stores as inline PTX) and the
# compaction over its sub-segments, end to end against the count as shipped, then the bound path's GPU tests
# with COUNT_LANES on.
# Predicted (before the run), from call 5's probe (a 164-row prefill block's count 36.6 -> 23.8 us; 64x32K
# level): the 4096x64K prefill ~1.50 -> ~1.45 (13 us saved a block of ~25 blocks, less the compaction's
# masked sub-segment reads); 64x128K (16 steps a program) a few us saved; 64x32K and 1x1M level (+-1 us);
# steps of 1,024 with it no better than 512. Every row exact; every test passes.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 300 python3 docs/perf_logs/topk_count_step_h100/count_ab.py --profile --out $OUT/count_ab.json \
  --variants COUNT_LANES=0,COUNT_LANES=1,COUNT_LANES=1+COUNT_STEP=1024 > $OUT/count_ab.log 2>&1
tail -16 $OUT/count_ab.log
timeout 200 python3 -c "
import sys, pytest
from indexer_logits import _topk_bound as B
B.COUNT_LANES = True
sys.exit(pytest.main(['-q', 'tests/test_topk_gpu.py', '-k', 'bound']))" > $OUT/gpu_tests_lanes.log 2>&1
tail -3 $OUT/gpu_tests_lanes.log
