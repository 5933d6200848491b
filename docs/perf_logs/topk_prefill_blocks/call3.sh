# Device call 3 (2026-12-05, thirteenth session): the count by rows (COUNT_LANES) on for prefill blocks too
# (_topk_bound.lanes_for: decode calls and prefill blocks of 8 or more steps a program), after call 2 timed
# it 89 us faster on the 4096x64K prefill with its sub-segments packed in place. The GPU tests that serve a
# prefill or the bound path, then bench.topk --paths auto with the committed tables.
# Predicted (before the run): the tests pass; bench.topk on an H100: decode as the twelfth session left it
# (64x32K ~1.28, 64x128K ~1.12, 1x1M ~1.34, 128x8K ~1.31), prefill 4096x64K ~1.48 (1.50 before), 2048x1M
# ~1.20 (the tiles path: unchanged).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 60 python3 -m pytest -q tests/test_topk_gpu.py -k "bound or ragged or prefill or chunked" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
timeout 170 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -10 $OUT/bench_topk.log
