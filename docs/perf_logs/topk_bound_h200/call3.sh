# Device call 3 (2026-12-05, ninth session; an H100, the H200 not lent): the bound path after call 1's
# profile (its compaction 33.3 us at 64 x 32K against the rounds' 13.9: ~200 candidates a row in the
# threshold bin, ranked 32 x 32 a step, ~56 dependent L2 loads on the row's last program; a CPU
# emulation on the bench's logits, /tmp emulate, gave 195-204 a row at 64 x 32K, 274 at 1 x 1M).
# Changed: the keys' histogram has 2 * BINS bins (both of the state's histograms: no round 2 here),
# and its linear range ends at the top of the maxima's bin holding the ceil(k / TILE)-th largest
# maximum (the k-th score is at most that maximum) rather than at the row's largest score: the
# emulation gives 30-46 candidates at 64 x 32K, 57 at 1 x 1M.
# Predicted (before the run), logits + top-k over the logits, H100: 64x32K bound 1.52 -> ~1.36
# (~1.30 with SEGMENTS; its compaction ~16 us), 1x1M 1.69 -> ~1.28, 64x128K 1.25 -> ~1.20, 128x8K
# unchanged (bound is not meant there); prefill 4096x64K 1.74 -> ~1.67, 2048x1M 1.30 -> ~1.16.
set -x
timeout 120 python3 docs/perf_logs/topk_bound_h200/segments_ab.py > $OUT/segments_ab.log 2>&1
tail -6 $OUT/segments_ab.log
timeout 260 python3 -m bench.topk --paths auto,bound --profile --out $OUT/paths > $OUT/paths.log 2>&1
grep -A14 "path bound" $OUT/paths.log | grep -E "kernel|path" | cut -c1-60,100-150
tail -9 $OUT/paths.log
timeout 140 python3 -m pytest -q tests/test_topk_gpu.py -k "bound or tiles or epilogue" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
