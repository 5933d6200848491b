# Device call 5: prefill top-k blocks overlapped with the next block's logits on a side stream.
# Predicted (written before the run): the logits kernel is bound by the tensor cores and the
# selection by latency and memory, so on two streams they share the SMs: 4096x64K from 1.71x the
# logits to 1.45-1.55x, 2048x1M from 1.48x to 1.30-1.40x; exact; extra memory as before (two
# buffers of half the budget: ~0.05 of the logits).
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "overlapped or ragged or chunked or memory or second_call" > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_l2_h200/overlap_ab.py > $OUT/overlap_ab.log 2>&1
cat $OUT/overlap_ab.log | tail -4
