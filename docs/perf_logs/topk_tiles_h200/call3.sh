# Device call 3: "auto" picks tiles for many long rows (pick_path: 256K keys or more, 16 rows or
# more, 8M keys in all; call 2's crossover), prefill's blocks count the tiles path's buffers in
# their budget; every GPU test but the tools' own, then the top-k tools' GPU tests, then
# bench.topk end to end. Predicted: the decode shapes as before (auto does not pick tiles there:
# 1.46 / 1.30 / 1.55 / 1.43); prefill 4096x64K ~1.69 (rounds), 2048x1M ~1.25 (tiles) with extra
# memory ~0.05 of the logits (under 1/16); every row exact.
set -x
python3 -m pytest -q -m gpu tests --ignore-glob='tests/test_bench_*' -x > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 -m pytest -q -m gpu tests/test_bench_topk.py tests/test_bench_eager_topk.py > $OUT/gpu_bench_tests.log 2>&1
tail -3 $OUT/gpu_bench_tests.log
python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
