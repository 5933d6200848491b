# Device call 4: the GPU tests call 3's -x stopped at (test_topk_gpu.py, whose recorded-launches
# test now derives the prefill's replays from the block size and the slices' alignment, and the
# two files after it), then the selection's tune with the MARGIN rule (never run on the GPU
# before) at the four decode buckets, and verify-topk. Predicted: 64x128K and 1x1M keep
# a tuned rounds setting (4% / 5-7% under the built-in, call 9), 64x32K and 128x8K the built-in
# choice (within 2%); tiles is tried at 1x1M only (the space's 256K keys) and loses there.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py tests/test_verify_bound.py tests/test_verify_large.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 cli.py tune-topk --fresh --buckets 64x32768,64x131072,1x1048576,128x8192 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -6 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -6 $OUT/verify_topk.log
