# Device call 10 (2026-12-06, fifteenth session): every top-k GPU test with the selection's plan (SelectionPlan,
# shared by a prefill call's blocks) and the 48 MiB scratch floor as the defaults, the fast path's GPU tests, and
# bench.eager_topk (the host time of one eager top-k call: one block, so the plan is made once a call as before).
# Predicted (before the run): all pass; eager top-k host time within 10% of the third session's H200 figures
# (83-106 us a call; on an H100 host now).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q tests/test_topk_gpu.py tests/test_fastpath_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 150 python3 -m bench.eager_topk --calls 500 --out $OUT/eager > $OUT/eager_topk.log 2>&1
tail -6 $OUT/eager_topk.log
