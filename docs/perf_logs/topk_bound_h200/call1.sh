# Device call 1 (written 2026-12-05, eighth session, no GPU lent; for the next session with one):
# the bound path (indexer_logits._topk_bound) against the table's choice and the tiles path, end to
# end, decode (the epilogue writes the bound path's maxima and range) and prefill (its own maxima),
# with the per-kernel profile at 64 x 32K and of the prefill call.
# Predicted (2026-12-05, before any run; from the profiles in docs/PERF.md "Top-k"), logits + top-k
# over the logits: decode 64x32K 1.38-1.42 (auto 1.47: range and round 2 gone, round 1 over 4,096
# maxima a row ~3 us, the keys' count ~ round 2's ~7 us, the compaction as before ~15 us), 64x128K
# 1.18-1.22 (tiles 1.24), 1x1M 1.40-1.46 (1.54), 128x8K no better than the row path's 1.45 (tiles of 4:
# 2,048 maxima a row, a weak bound); prefill 4096x64K 1.55-1.62 (1.71: a 204 x 64K block's 141 us less
# the range 17 and round 1's ~30, plus its maxima ~19 and round 1 over them ~5), 2048x1M level with
# tiles' 1.17 or better. Every row exact. Where it loses, the profile says which kernel.
set -x
timeout 300 python3 -m bench.topk --paths auto,bound,tiles --profile --out $OUT/paths > $OUT/paths.log 2>&1
tail -12 $OUT/paths.log
# SEGMENTS on and off (predicted: 64 x 32K ~1.32-1.36 with them, against bound's 1.38-1.42 without)
timeout 120 python3 docs/perf_logs/topk_bound_h200/segments_ab.py > $OUT/segments_ab.log 2>&1
tail -6 $OUT/segments_ab.log
timeout 140 python3 -m pytest -q tests/test_topk_gpu.py -k "bound or tiles or epilogue" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
