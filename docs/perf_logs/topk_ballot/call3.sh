# Device call 3 (2026-12-06, nineteenth session): the bound compaction's slot atomics and stores inline
# (COMPACT_INLINE) against as served; the GPU tests of the count's forms and of the compaction inline (the scores
# written beside the indices checked too).
# Predicted (before the run; call 2's count lost two of four barriers a step and took 1.1-1.4 us off, and
# cross-compiled, the compaction's step loses all ~8 of its barriers, its loop ~25% shorter, one iteration at
# the decode shapes): decode 64x32K, 1x1M, 32x16K -0.5 to -2 us each; 64x128K and 16x256K -0.5 to -2; the
# 128x8K row path level (a control); prefill 4096x64K -25 to -75 us (25 blocks), 2048x1M within noise. Every row
# exact; the GPU tests (8 forms x 2 shapes x 3 kinds) pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py > $OUT/call3_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call3_gpu_tests.log
timeout 300 python3 docs/perf_logs/topk_ballot/ballot_ab.py --call3 --rounds 4 --out $OUT/call3_ab.json > $OUT/call3_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call3_ab.log
