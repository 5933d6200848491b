# Device call 2: call 1's A/B patched a module function between calls, and the recorded launches
# (keyed by the settings) replayed the first variant for both: its "fit against tau" compared fit
# with itself (71.1 / 70.9 us). Its other figures stand: every row of the bench's 64 x 128K and
# 102 x 1M logits stopped at level 1 (2,444 and 2,313 tiles a row picked where tau picks ~2,049),
# the selection's kernels 71.1 us at 64 x 128K (call 8's profile, before: ~74 with its range
# kernel), and end to end 64 x 128K 1.28, 2048 x 1M 1.16 (call 9: 1.28 and 1.17).
# Now FIT is a setting (a tuner axis), and the tiles path's own five kernels launch with PDL.
# Predicted: FIT alone -2 to -3 us of kernels at 64 x 128K (the first compaction and round 2
# skipped) less ~1-2 us for the larger second selection: level end to end within 1%; PDL -3 to -5
# us end to end (six launch boundaries, ~0.5-1 us each, as the logits kernel's PDL saved ~1 us);
# fit+pdl 64 x 128K ~350-352 us, 1.26-1.27 of the logits; 102 x 1M block a few us less. Then the
# 64x131072 bucket re-tuned with FIT in the space, and bench.topk end to end with that table (call3.sh).
# Added 2026-12-05 (no GPU that session), MERGE: the pick copies the tiles it picks and the last
# compaction writes keys: no gather, no remap kernel (ten launches, not twelve). Predicted: -3 to -6
# us of the selection at 64 x 128K (gather 5.5 and remap 1.7 us of kernels, less the copy the pick now
# does: ~2.4K tiles x 8 keys a row, 5 MB in all, and the compaction's list reads, k a row);
# fit+pdl+merge 64 x 128K ~344-350 us, 1.24-1.26 of the logits. The tune (call3.sh) tries MERGE too.
set -x
python3 docs/perf_logs/topk_fit_h200/fit_ab.py --out $OUT/fit_ab.json > $OUT/fit_ab.log 2>&1
tail -5 $OUT/fit_ab.log
timeout 150 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tiles or memory or tuned" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
# the tile maxima from the logits epilogue (experiments/topk_epilogue/; its prediction in its README)
timeout 200 python3 experiments/topk_epilogue/ab.py --out $OUT/epilogue_ab.json > $OUT/epilogue_ab.log 2>&1
tail -8 $OUT/epilogue_ab.log
