# Device call 9: call 8's table was lost (bench.topk wrote its own topk.json over the copy under
# $OUT), so the tune runs again, its table copied under another name; then verify-topk, the top-k
# GPU tests with the table in place (the "auto" path served by it), bench.topk end to end.
# Predicted: the same choices as call 8 within noise (64x128K BINS 32 / 16 programs an SM ~4% under
# the built-in, 1x1M ~5%, 64x32K and 128x8K the built-in settings).
set -x
python3 cli.py tune-topk --buckets 64x32768,64x131072,1x1048576,128x8192 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -6 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -5 $OUT/verify_topk.log
python3 -m pytest -q -m gpu tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/topk.log 2>&1
tail -9 $OUT/topk.log
