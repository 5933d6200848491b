# Device call 7 (2026-12-05, twelfth session; an H100): COUNT_LANES as rebuilt after call 6: the count's
# sub-segments (second half of a segment of twice the slots) copied to one segment at the end of each
# program, so the compaction reads a segment as before (call 6's compaction over sub-segments in place:
# 8.4 -> 12.1 us at 64x32K). End to end against the count as shipped, then the bound GPU tests with it on.
# Predicted (before the run): per kernel at 64x32K the count ~9.8 us (call 6: 8.8, plus the copy), the
# compaction 8.4 as before: end to end ~1 us saved (1.29 -> ~1.28); 64x128K ~15-20 us saved (1.16 -> ~1.12);
# 16x256K ~7; 1x1M level; the 4096x64K prefill ~1.51 -> ~1.44. Every row exact; every test passes.
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
