# Device call 1 (2026-12-05, twelfth session; an H100, the H200 not lent): the bound path's maxima summarized
# by one program a row (SUMMARY) against the range and histogram kernels, end to end, then the top-k GPU tests
# with SUMMARY on by default.
# Predicted (before the run), logits + top-k, the runtime's serving path with SUMMARY on / off: 64x32K ~2 us
# saved of ~139 (1.29 -> ~1.27: one launch fewer, a count that starts reading at once); 64x128K ~2 us of ~470;
# 1x1M (the epilogue's maxima, 16K a row, one program) ~2-4 us *lost*: one program over 16K maxima against
# the histogram kernel's 32 chunks; 16x256K about level; prefill 4096x64K (256-row blocks, bound) ~3 us a
# block saved (~50 us of ~6.9 ms). Per kernel at 64x32K, PDL off: the summary ~3 us against range + round 1
# ~4 us, the count ~1 us shorter. Every row exact; every test passes.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 docs/perf_logs/topk_summary_h100/summary_ab.py --profile --out $OUT/summary_ab.json > $OUT/summary_ab.log 2>&1
tail -16 $OUT/summary_ab.log
timeout 300 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
