# Device call 3: the recorded sequence launched through its direct plans with one stream read.
# Predicted: 5-10 us less than call 2's 100-145 us a top-k call; then a cProfile of the rest.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "second_call or graph_replay" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_l2_h200/host_topk.py 1000 --profile > $OUT/host_topk.log 2>&1
head -3 $OUT/host_topk.log
grep -A32 "Ordered by" $OUT/host_topk.log | cut -c1-150
