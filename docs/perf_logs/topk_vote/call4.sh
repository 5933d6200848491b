# Device call 4 (2026-12-07, twenty-fourth session): the whole top-k GPU file, the fast path's and the eager top-k
# bench's GPU tests with the votes served by the model (on where the count's programs read 8 steps or more: the
# prefill's blocks, 64x128K, 16x256K); call 1 of topk_standing_inline ran the top-k file before the votes.
# Predicted (before the run): all pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 420 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py tests/test_fastpath_gpu.py tests/test_bench_eager_topk.py -m gpu > $OUT/call4_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call4_gpu_tests.log
