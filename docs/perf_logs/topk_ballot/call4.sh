# Device call 4 (2026-12-06, nineteenth session): the committed state, as it ships: the compaction's inline
# atomics reverted (call 3: level), the H100's re-tuned top-k table; the top-k GPU tests that the bound path
# serves (the device time left after failed starts does not hold the whole file) and bench.topk.
# Predicted (before the run): every test passes; bench.topk within call 3's figures (its compaction was inline,
# which call 3 timed level): decode 64x32K ~1.21, 64x128K ~1.09, 1x1M ~1.32, 128x8K ~1.31, prefill 4096x64K
# 1.43-1.49, 2048x1M ~1.19; extra memory 0.06 and 0.055 of the logits.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py tests/test_topk_gpu.py -k "bound or memory or ragged or chunked" > $OUT/call4_gpu_tests.log 2>&1
echo "tests rc $?"; tail -4 $OUT/call4_gpu_tests.log
timeout 150 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call4_bench_topk.log 2>&1
echo "bench rc $?"; tail -9 $OUT/call4_bench_topk.log
# Call 5, on the same warm machine right after (the rest of the top-k GPU file, within the device time left; its
# output came back in the reply only: 103 passed, 18 deselected, in 82 s):
#   timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py -k "not (bound or memory or ragged or chunked)" -x
