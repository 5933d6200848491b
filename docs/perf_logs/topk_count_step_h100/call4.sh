# Device call 4 (2026-12-05, twelfth session; an H100): the keys' count loading a step ahead (COUNT_PREFETCH)
# at steps of 512 and 1,024 (COUNT_STEP), end to end and per kernel, then the bound path's GPU tests.
# Why: call 3 (count_parts.py) has the count's segments cost 5.5 us at 64x32K (9.4 against 3.9 without
# them or its atomics) and 21 us of 36 in a 164-row prefill block, where the prefix sum's barriers hold
# every warp with no load in flight.
# Predicted (before the run): the count at 64x32K 10.7 -> ~8 us with the load ahead (512 a step), ~7.5 at
# 1,024; end to end 64x32K 1.28 -> ~1.26; 64x128K (16 steps a program) ~1.16 -> ~1.14; 1x1M (2 steps) level;
# the 4096x64K prefill 1.5 -> ~1.44 (15 steps a program). Every row exact; every test passes.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 300 python3 docs/perf_logs/topk_count_step_h100/count_ab.py --profile --out $OUT/count_ab.json \
  --variants COUNT_STEP=0,COUNT_STEP=0+COUNT_PREFETCH=1,COUNT_STEP=1024,COUNT_STEP=1024+COUNT_PREFETCH=1 > $OUT/count_ab.log 2>&1
tail -18 $OUT/count_ab.log
timeout 250 python3 -m pytest -q tests/test_topk_gpu.py -k "bound" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
