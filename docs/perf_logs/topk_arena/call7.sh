# Device call 7 (2026-12-06, sixteenth session): the top-k's workspace kept from one eager call to the next on
# the same stream (_topk_workspace, KEEP on by default): the GPU tests (the workspace's own: one a stream, none
# kept in graph capture, the replay exact; the top-k file, the fast path's, bench.eager_topk's), then
# workspace_host_ab.py with KEEP off and on, alternated, over cases of every path (128x8K, the row path's, takes
# no workspace either way: a control).
# Predicted (before the run): every test passes; the host time of a call that takes a workspace 10-15 us less
# (call 2's torch.zeros: 11-15 us), the end-to-end time of the host-bound cases as much less; 8192 x 8K level
# (bound by the GPU); the control level (within 3 us); the same indices.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 280 python3 -m pytest -q -m gpu tests/test_topk_workspace.py tests/test_topk_gpu.py tests/test_fastpath_gpu.py \
    tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 120 python3 docs/perf_logs/topk_arena/workspace_host_ab.py --flag _topk_workspace.KEEP \
    --cases decode:1x4096,decode:64x32768,decode:1x1048576,prefill:1024x4096,prefill:8192x8192,decode:128x8192 \
    --out $OUT/kept_host_ab.json > $OUT/kept_host_ab.log 2>&1
tail -8 $OUT/kept_host_ab.log
