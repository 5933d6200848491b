# Device call 2 (2026-12-06, twenty-first session): the defaults after call 1 (the bound path's early loads on for
# decode calls only: COUNT_EARLY / COMPACT_EARLY None; the row path's rows held: HOLD on). (1) the top-k and bound GPU
# files as committed; (2) early_ab.py --after: served against each turned off, and the early loads on for prefill
# blocks too, end to end, alternated; (3) bench.topk --paths auto, the standing.
# Predicted (before the run): (1) all pass; (2) early off +0.2 to +1.7 us at the bound decode cases (call 1's
# gains, each within ~0.5 us of noise), held off +0.9 at 128x8K and +1.8 at 64x8K, the early loads on for prefill
# within the prefills' run-to-run noise (1-4%); every row exact; (3) on an H100: 64x32K ~1.20, 64x128K ~1.08, 1x1M
# ~1.30, 128x8K ~1.27, prefill 4096x64K 1.41-1.47, 2048x1M 1.16-1.19 (the bar 1.25 / 1.3 holds at 64x32K, 64x128K
# and 2048x1M as before, not at 1x1M, 128x8K, 4096x64K).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py tests/test_topk_bound_gpu.py > $OUT/call2_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
timeout 200 python3 docs/perf_logs/topk_early/early_ab.py --after --rounds 5 --out $OUT/call2_ab.json > $OUT/call2_ab.log 2>&1
echo "ab rc $?"; cat $OUT/call2_ab.log
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call2_bench_topk.log 2>&1
echo "bench rc $?"; tail -9 $OUT/call2_bench_topk.log
