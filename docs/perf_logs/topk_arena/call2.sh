# Device call 2 (2026-12-06, sixteenth session): a top-k call's buffers from one allocation
# (_topk_buffers.ONE_ALLOCATION, on by default): the GPU tests that cover it and two of those call 1 failed
# (bench.eager after its descriptor fix, the peers' 4096 x 8K case after packing the cache 16K pages at a time;
# not the tuner's two that need optuna: its wheels would take the carried tree past 64 MiB); arena_ab.py, one
# allocation against a buffer each, alternated;
# eager_profile.py's parts with it on.
# Predicted (before the run): every test passes; a one-block eager call's host time 15-25 us less (decode 1x4K
# ~110 -> ~90 us; carve costing ~8-12 us where the workspace's zeros and 3-5 allocations cost 25-40); 8192 x 8K
# end to end level (within 2%: a call's host time falls by one block's saving, not per block); the peak memory a
# call adds level (within 1 MiB); the same indices.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 250 python3 -m pytest -q -m gpu tests/test_topk_gpu.py tests/test_fastpath_gpu.py tests/test_bench_eager_topk.py \
    tests/test_bench_eager.py \
    "tests/test_peer_suites.py::test_gpu_deepgemm_54e2261_paged" > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_arena/arena_ab.py --out $OUT/arena_ab.json > $OUT/arena_ab.log 2>&1
tail -10 $OUT/arena_ab.log
timeout 120 python3 docs/perf_logs/topk_eager_host/eager_profile.py --out $OUT/eager_profile.json > $OUT/eager_profile.log 2>&1
grep -A14 "alone" $OUT/eager_profile.log | tail -60
