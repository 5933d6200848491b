# Device call 3 (2026-12-06, sixteenth session): bench.eager's GPU test after it leaves desc_us out where the
# serving module takes no cache descriptor (call 2: its table broke on a None), with the one allocation a call
# reverted; bench.eager itself, whose table it checks.
# Predicted (before the run): the test passes.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q -m gpu tests/test_bench_eager.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
