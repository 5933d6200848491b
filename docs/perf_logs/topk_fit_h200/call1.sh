# Device call 1 (2026-12-04, fifth session): the tiles path's first selection stops at the bin
# that fits (_topk_digits._fit): where round 1's threshold bin over the tile maxima (or round 2's)
# holds few enough maxima that all at or above it are at most 2k tiles, the pick takes those and
# round 2 / the compaction skip the row; tau only where a bin overfills.
# Predicted (written before the run), from call 8's profile of 64 x 128K by tiles of 8 (first
# compaction ~11.7 us, round 2 over the maxima ~4-5, pick counts 3.6): the first compaction down to
# ~2-3 us (a read of the histograms and an exit), round 2 over the maxima to ~2, the counts
# without tau's 8 KB a program; the second selection a little dearer (up to 2k tiles instead of
# ~k + a few). Selection alone 64 x 128K ~73 -> ~62-65 us; end to end 355.7 -> ~345-348 us, 1.24-1.25
# of the logits; prefill block 102 x 1M ~10 us less a block (2048 x 1M 1.17 -> ~1.16); every row of
# the bench's inputs stopping at level 1 or 2; every row exact.
set -x
python3 docs/perf_logs/topk_fit_h200/fit_ab.py --out $OUT/fit_ab.json > $OUT/fit_ab.log 2>&1
tail -6 $OUT/fit_ab.log
timeout 150 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tiles or memory or tuned" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
timeout 300 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
