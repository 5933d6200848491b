# Device call 4: every GPU test (the tools' own: the top-k benches only), then bench.eager_topk
# (the top-k call's host time, recorded against launch code, alternated) and bench.topk's table.
# Predicted: host per top-k call ~100-140 us recorded against ~300-330 through the launch code;
# bench.topk's ratios as call 2's (1.48 / 1.33 / 1.64 / 1.43 decode, 1.71 / 1.47 prefill).
set -x
python3 -m pytest -q -m gpu tests --ignore-glob='tests/test_bench_*' -x > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 -m pytest -q -m gpu tests/test_bench_topk.py tests/test_bench_eager_topk.py > $OUT/gpu_bench_tests.log 2>&1
tail -3 $OUT/gpu_bench_tests.log
python3 -m bench.eager_topk --calls 1000 --out $OUT > $OUT/eager_topk.log 2>&1
tail -6 $OUT/eager_topk.log
python3 -m bench.topk --paths auto --out $OUT > $OUT/topk.log 2>&1
tail -9 $OUT/topk.log
