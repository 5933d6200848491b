# Device call 5 (2026-12-05, twelfth session; an H100): call 3's probe again, with lane_probe: a step as rows
# of 32 keys whose prefix sums stay in a warp (no barrier in the loop with its atomics and stores as inline
# PTX; cross-compiled for sm_90: 1 bar.sync in the kernel against 11-14), sub-segments a row.
# Why: call 4 refuted loading a step ahead (the count 10.7 -> 11.0 us at 64x32K), so the segments' 5.5 us
# are the prefix sum and count themselves: two cross-warp passes through shared memory a step.
# Predicted (before the run): at 64x32K "lanes, asm" ~5 us (against "all" 9.4 and "digits only" 3.9),
# "lanes" (tl.atomic_add / tl.store, converted) ~8; the prefill block "lanes, asm" ~20 us against 36.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 300 python3 docs/perf_logs/topk_count_step_h100/count_parts.py --out $OUT/count_parts.json > $OUT/count_parts.log 2>&1
tail -6 $OUT/count_parts.log
