# Device call 5 (2026-12-05, ninth session, an H100): with the H100's top-k table committed
# (tables/nvidia_h100_80gb_hbm3/topk.json, call 4) and SEGMENTS on by default: every top-k GPU test,
# and verify-topk (each entry exact on other inputs, timed beside the built-in choice).
# Predicted: all pass; verify-topk within 3% of call 4's times.
set -x
timeout 300 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 150 python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -8 $OUT/verify_topk.log
