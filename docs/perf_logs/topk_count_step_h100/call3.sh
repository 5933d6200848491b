# Device call 3 (2026-12-05, twelfth session; an H100): where the keys' count's 10.7 us go at 64x32K
# (count_parts.py: a probe kernel shaped as the count with its parts switched on one at a time).
# Call 2 refuted fewer, longer steps (2,048 keys a step 12.3 us, 4,096 29.1: registers, not steps, bound it).
# Predicted (before the run): at 64x32K "all" ~10 us, "no segments" ~8 (the ninth session's count without
# them: 8.0), "no atomics" ~8, "digits only" ~5, "load and compare" ~4.5 (the maxima kernel's read: 4.5);
# i.e. the atomics and the segments' prefix sums about 2-3 us each; the prefill block in proportion.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 300 python3 docs/perf_logs/topk_count_step_h100/count_parts.py --out $OUT/count_parts.json > $OUT/count_parts.log 2>&1
tail -6 $OUT/count_parts.log
