# Device call 2: the pick in parallel (a count per chunk of maxima, then each chunk's picks at its
# slots; call 1's pick was one program a row scanning all its maxima), and the model's tile
# (tile_for: 8 at 64K-128K, 16 at 1M). Call 1 (one-program pick): prefill 2048x1M 1.22 with tiles
# of 16 / 32 (auto 1.45); every other shape slower than auto; 1x1M 124-264 us against 61.
# Predicted: 2048x1M ~1.18 (the pick was ~1-2 ms of the 8.1 ms selection); 1x1M ~70-80 us (still
# slower than auto: twelve phases for one row); 64x128K ~1.30, level with auto; 64x32K, 128x8K,
# 4096x64K still slower. Crossover (selection alone, rounds vs tiles): tiles ahead from 512K keys
# at 64 rows and more, behind at 1 row everywhere.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tiles or memory" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py --tiles 0,32 --out $OUT/tiles_ab.json > $OUT/tiles_ab.log 2>&1
tail -10 $OUT/tiles_ab.log
python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py --crossover --out $OUT/crossover.json > $OUT/crossover.log 2>&1
tail -14 $OUT/crossover.log
