# Device call 4 (2026-12-06, fourteenth session): the ragged logits kernel's tile maxima again, read back after
# the tile loop (templates/prefill_ragged.py.jinja, _chunk_maxima: one barrier, then each program's chunk of
# stored logits read from L2 as [rows, runs, 16] and reduced along its own registers), not from the dot's
# layout in the loop (call 1: +43% on the kernel). Cross-compiled (sm_90, Triton 3.6): off, every committed
# ragged module the same PTX as before; on, the H200 table's module +16 registers (222 -> 238), no spill.
# Predicted (before the run), 4096x64K, lanes on by default for prefill blocks now:
# - the GPU tests pass (the epilogue's, with 1 and 3 sequences; bound, ragged, chunked);
# - the ragged logits kernel over 25 blocks +1-3% (~4613 -> ~4700 us on an H100); the maxima and range kernels
#   (~520 us) gone; end to end ~1.48 -> ~1.38 of the logits;
# - bench.topk --paths auto: decode as before (64x32K ~1.28, 64x128K ~1.12, 1x1M ~1.34, 128x8K ~1.31 on an
#   H100), prefill 4096x64K ~1.38, 2048x1M ~1.20 (tiles serve its blocks: no epilogue there).

set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
TESTS=${SKIP_BENCH:+ragged}  # the short call: the ragged prefill's tests only (the epilogue's among them)
timeout 90 python3 -m pytest -q tests/test_topk_gpu.py -k "${TESTS:-bound or ragged or prefill or chunked or epilogue}" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 140 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --variants RAGGED_EPILOGUE=0,RAGGED_EPILOGUE=1 --out $OUT/prefill_probe.json > $OUT/prefill_probe.log 2>&1
tail -14 $OUT/prefill_probe.log
if [ -z "${SKIP_BENCH:-}" ]; then  # (SKIP_BENCH=1: the device time left holds the tests and the probe only)
  timeout 170 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
  tail -10 $OUT/bench_topk.log
fi
