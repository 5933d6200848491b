# Device call 4 (2026-12-07, twenty-sixth session), for an H200 only (an H100 ran calls 1-3): its top-k standing with
# today's code (bench.topk --paths auto; its re-tune, `tune-topk --fresh`, no longer fits the session's device time
# left). First, on any GPU, the workspace tests (after _capture_info's call took four NULLs
# after its three arguments, whichever symbol the driver has).
# Predicted (before the run), an H200: 64x32K 1.25-1.31, 64x128K ~1.09, 1x1M 1.36-1.44, 128x8K 1.28-1.34, 4096x64K
# 1.30-1.36, 2048x1M 1.12-1.16. The tests pass.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout 100 python3 -m pytest -q tests/test_topk_workspace.py > $OUT/call4_tests.log 2>&1
echo "tests rc $?"; tail -2 $OUT/call4_tests.log
case "$GPU" in *H200*) ;; *) echo "not an H200: $GPU"; exit 0 ;; esac
timeout 130 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call4_bench_before.log 2>&1
echo "bench rc $?"; tail -10 $OUT/call4_bench_before.log
