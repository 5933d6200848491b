# Device call 6 (2026-12-06, fifteenth session): where the ragged prefill top-k's host time goes with the logits
# kernel's tile maxima on (call 4: enqueue 4279 -> 6532 us a 4096 x 64K call, ~90 us a block), and the top-k GPU
# tests the fourteenth session's review changed (the watched logits call) with the ragged and epilogue ones.
# Predicted (before the run): with RAGGED_EPILOGUE=1 the blocks' logits calls are not all replayed (fewer than 25
# replays a call; the full path's checks, dispatch and Triton's binder, ~90 us, each block), and
# _fastpath._UNCACHEABLE names why; the selections' host time is the same with it on and off (~150 us a block).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 -m pytest -q tests/test_topk_gpu.py -k "epilogue or ragged" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_prefill_blocks/host_profile.py --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -4 $OUT/host_profile.log
