# Device call 2 (2026-12-05, twelfth session; an H100, the H200 not lent): the bound path's keys' count at
# 512 (the path's BLOCK), 1,024, 2,048 and 4,096 keys a step (COUNT_STEP), end to end and per kernel.
# Why: call 1's profile with PDL off has the count at 10.7 us of the 31-us selection at 64x32K (8 MB read at
# 0.8 TB/s, where the maxima kernel reads them in 4.5 us): four steps of 512 keys a program, each a load, a
# digit, an atomic for the few admitted and a block-wide prefix sum in turn.
# Predicted (before the run): the count at 64x32K (chunks of 2,048) 10.7 -> ~8 us at 1,024, ~6.5 at 2,048,
# no better at 4,096 (half of its one step masked, 208 registers); end to end 64x32K 1.28 -> ~1.24 at 2,048;
# 64x128K (chunks of 8,192) ~10 us saved (1.16 -> ~1.14); 1x1M (chunks of 1,024) level; 16x256K a few us;
# the 4096x64K prefill (blocks of 164 rows, chunks of ~8K) 1.48 -> ~1.43. Every row exact at every step.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 400 python3 docs/perf_logs/topk_count_step_h100/count_step_ab.py --profile --out $OUT/count_step_ab.json > $OUT/count_step_ab.log 2>&1
tail -16 $OUT/count_step_ab.log
