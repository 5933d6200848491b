# Device call 21 (2026-12-05, eleventh session; an H100): the built-in choice now serves a decode call of at most
# 16 rows of 512K keys or more by bound (its maxima from the logits epilogue). The top-k GPU tests; then
# bench.topk (decode) with every top-k table moved aside: what an untuned GPU gets.
# Predicted (before the run): every test passes; untuned 1x1M ~1.35 (call 16: 1.42), the other three as in call 16.
set -x
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
for t in indexer_logits/tables/*/topk.json; do mv "$t" "$t.aside"; done
timeout 120 python3 -m bench.topk --paths auto --skip-prefill --out $OUT/bench > $OUT/bench_no_table.log 2>&1
tail -6 $OUT/bench_no_table.log
