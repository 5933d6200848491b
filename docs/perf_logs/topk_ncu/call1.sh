# Device call 1 (2026-12-06, eighteenth session): where the H200's top-k selections spend their time, as served
# (call 26 of topk_bound_h200 read 1.35 / 1.13 / 1.49 / 1.41 of the logits at 64x32K / 64x128K / 1x1M / 128x8K):
# torch.profiler's per-kernel times (decode_parts.py of topk_arena, never run on an H200), then Nsight Compute
# over one call a case (ncu_target.py): each selection kernel's duration, occupancy, and where its warps stall.
# Predicted (before the run):
# - per kernel (H200, PDL off): 64x32K round 1 ~2.5 us, count ~10, compaction ~8, the logits kernel ~1.5 us over
#   the logits alone (its epilogue); 1x1M round 1 ~2.5, count ~7, compaction ~8.5; 128x8K row ~15.
# - the count at 64x32K: stalls mostly on its loads and atomics (long scoreboard, lg throttle), achieved
#   occupancy near its limit; the compaction at 1x1M (1,024 programs a row) and the row kernel: most warps idle
#   (low issue rate), the compaction's time in its tail (one program ranking) and its same-address atomics
#   (1,024 programs on the row's three counters), the row kernel's in barriers (its prefix sums and the sort).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 docs/perf_logs/topk_arena/decode_parts.py --out $OUT/call1_decode_parts.json > $OUT/call1_decode_parts.log 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
timeout 330 $NCU --clock-control none --profile-from-start off --target-processes all \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --print-units base \
  python3 docs/perf_logs/topk_ncu/ncu_target.py 64x32K 1x1M 128x8K > $OUT/call1_ncu.log 2>&1
echo "ncu rc $?"
cut -c1-150 $OUT/call1_decode_parts.log
grep -E "^  [a-z_]+|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Issued Ipc|No Eligible|Warp Cycles Per Issued|Stall|^[0-9a-zA-Z]+ path" $OUT/call1_ncu.log | cut -c1-150 | head -150
