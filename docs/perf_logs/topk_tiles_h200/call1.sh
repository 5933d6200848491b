# Device call 1 (2026-12-04, fourth session): the tiles path (two passes: tile maxima, the k-th
# largest bounds the k-th score, the four kernels over the picked tiles' keys only).
# Predicted before the run (selection = top-k call less the logits; figures x the logits alone):
#   decode 64x128K  tiles 8 ~1.22, 16 ~1.24 (auto 1.31): the selection 85 -> ~60-68 us
#   decode 1x1M     tiles worse than auto (more phases for one row): ~1.7
#   decode 64x32K, 128x8K: tiles no better than auto (rows of 32K / 8K are 16 / 4 k-tiles of 8)
#   prefill 2048x1M tiles 32 / 16 ~1.15 (auto 1.41): the selection 15.8 -> ~5.5 ms
#   prefill 4096x64K tiles 8 ~1.5 (auto 1.69): 3.1 -> ~2.2 ms; extra memory over 1/16 there
# Every variant exact (decode every row, prefill the sampled blocks).
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py --tiles 8,16,32 --out $OUT/tiles_ab.json > $OUT/tiles_ab.log 2>&1
tail -12 $OUT/tiles_ab.log
