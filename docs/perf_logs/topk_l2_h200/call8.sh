# Device call 8: the top-k selection tuned per bucket (cli.py tune-topk) at the four decode
# shapes, verified on other inputs (verify-topk), then bench.topk served by the table.
# Predicted (written before the run): the tuner keeps today's choices within noise at 64x32K,
# 64x128K and 1x1M (the sweep that set the defaults was run at these shapes) and finds 0-5% at
# 128x8K (CAP and warps of the row path); bench.topk's ratios move by at most a few percent.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tuned_table or second_call" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 cli.py tune-topk --buckets 64x32768,64x131072,1x1048576,128x8192 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -8 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk.json
python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -5 $OUT/verify_topk.log
python3 -m bench.topk --paths auto --skip-prefill --out $OUT > $OUT/topk.log 2>&1
tail -6 $OUT/topk.log
