# Device call 12 (2026-12-06, fifteenth session): after _api._device_sms answers a counted device from its cache (not
# run on a GPU in call 10): the top-k, runtime, DeepGEMM-API and fast-path GPU tests; then prefill_probe.py at the
# defaults (the re-tuned prefill entry: the count by rows off, 8 programs an SM) for the next session's breakdown.
# Predicted (before the run): all pass; 4096 x 64K end to end ~1.47 of the logits, the ragged kernel ~4800 us over
# 25 blocks, the count 30-36 us a block (lanes off), the compaction ~16.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py tests/test_runtime.py tests/test_deepgemm_api.py tests/test_fastpath_gpu.py -m gpu > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
timeout 100 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --variants RAGGED_EPILOGUE=1 --out $OUT/prefill_probe.json > $OUT/prefill_probe.log 2>&1
tail -6 $OUT/prefill_probe.log
