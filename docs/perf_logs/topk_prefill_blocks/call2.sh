# Device call 2 (2026-12-05, thirteenth session). Call 1 found the count by rows (COUNT_LANES) losing on the
# 4096x64K prefill through its blocks: its segments of twice the slots (the sub-segments beside the packed
# one) shrank a block to 142 rows (29 blocks; the logits in blocks 5125 us against 4613 for 25 of 164) while
# its count was faster (34.3 -> 26.8 us a block). Now the count packs its sub-segments in place through
# registers (_topk_bound._count_lanes, SUB_P2), so its segments are no larger than without lanes.
# Predicted (before the run):
# - the bound GPU tests pass with lanes forced on (the packing's barrier between its reads and its stores);
# - prefill, blocks of 164 rows either way: the count ~34 -> ~27 us a block (-190 us a call), the compaction
#   +0-1 us a block; end to end 1.49 -> ~1.45 of the logits; --block-rows 198 (the most the 1/16 bound
#   allows): ~100 us faster than 164 (fewer per-block tails, ~11 us each);
# - decode 64x128K and 16x256K with lanes as in call 7 of topk_count_step_h100 (10 and 6 us saved).
# (Trimmed to fit the session's last device time: the 132- and 165-row blocks and 64x32K / 1x1M left out.)
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 100 python3 -c "
import sys, pytest
from indexer_logits import _topk_bound as B
B.COUNT_LANES = True
sys.exit(pytest.main(['-q', 'tests/test_topk_gpu.py', '-k', 'bound or ragged']))" > $OUT/gpu_tests_lanes.log 2>&1
tail -3 $OUT/gpu_tests_lanes.log
timeout 170 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --block-rows 198 --out $OUT/prefill_probe.json > $OUT/prefill_probe.log 2>&1
tail -16 $OUT/prefill_probe.log
timeout 70 python3 docs/perf_logs/topk_count_step_h100/count_ab.py --prefill "" --cases 64x131072,16x262144 \
  --variants COUNT_LANES=0,COUNT_LANES=1 --out $OUT/count_ab.json > $OUT/count_ab.log 2>&1
tail -6 $OUT/count_ab.log
