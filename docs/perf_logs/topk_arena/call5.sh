# Device call 5 (2026-12-06, sixteenth session): the decode bar's cases under variants of the selection, end to end
# in CUDA graphs, alternated in one process (decode_ab.py): the row path without a workspace (SKIP_UNREAD_WORKSPACE,
# on by default now) against a zeroed one, and settings outside the tuner's space (the row path under PDL, its 256
# bins; the bound path's slots by prefix sums, fewer programs at 1 x 1M); then the top-k GPU tests with the change.
# Predicted (before the run): 128x8K without the workspace's fill 1-2 us faster (74.7 -> ~73: the fill kernel was
# 1.04 us in call 4, plus its gap); the row path under PDL -1 to -3 us; 256 bins and 256 candidates within 2 us;
# 32 warps slower. 1x1M: slots by prefix sums 1-3 us faster (its compaction's ~2,000 atomics on one address);
# 4 programs an SM -1 to +2 us. 64x32K: slots by prefix sums 0.5-2 us faster, the count by rows level. Every
# variant exact; the GPU tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 250 python3 docs/perf_logs/topk_arena/decode_ab.py --out $OUT/decode_ab.json > $OUT/decode_ab.log 2>&1
grep -v Warning $OUT/decode_ab.log | grep -v "_warn_once" | tail -20
timeout 250 python3 -m pytest -q -m gpu tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
