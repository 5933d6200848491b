# Device call 4 (2026-12-07, twenty-third session): the row path's write pass storing by inline PTX (_topk_row.INLINE,
# on by default from this commit) against tl.store: inline_ab.py (the kernel alone and logits + top-k end to end,
# alternated), then the top-k GPU file's row-path tests with it on.
# Predicted (before the run): call 3 put the write pass's stores at 4.7 of 15.6 us (the kernel with them cut out);
# cross-compiled, the inline form takes 102 registers at 16 warps where tl.store's took 127 (its stores' layout
# conversions through shared memory gone). The kernel 1-2.5 us less at 128 x 8K and 64 x 8K, end to end the same,
# so 128 x 8K ~1.28 -> 1.24-1.26 of the logits; every row exact; the tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 docs/perf_logs/topk_drain/inline_ab.py --out $OUT/call4_inline_ab.json > $OUT/call4_inline_ab.log 2>&1
echo "ab rc $?"; tail -4 $OUT/call4_inline_ab.log
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py -k row > $OUT/call4_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call4_gpu_tests.log
