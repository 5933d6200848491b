# Device call 1: the decode top-k with its first pass from the logits kernel's epilogue, as shipped
# (templates/decode_paged.py.jinja's tile_max, indexer_logits._topk.EPILOGUE): the top-k GPU tests, the
# end-to-end A/B of the epilogue against the path's own first pass, bench.topk.
# Predicted (before the run), from experiments/topk_epilogue/ab.py's run (topk_fit_h200/call2: 356.1 ->
# 346.0 us at 64 x 128K): the epilogue 9-11 us less at 64 x 128K (1.245-1.25 of the logits), about as
# much at 32 x 128K next_n 2 (64 rows), 18-22 us at 128 x 128K (twice the maxima bytes); bench.topk's
# 64 x 128K 1.245-1.25 (1.28 before), the other cases as before (the tiles path serves none of them).
set -x
# the tests the epilogue touches: every tiles-path case, the new test, the graph and second-call tests
timeout 240 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k 'tiles or epilogue or second_call or graph_replay' \
  > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
# (--any-store since the runtime asks run-store logits modules only, after this call: the form it ran)
timeout 200 python3 docs/perf_logs/topk_epilogue_h200/epilogue_onoff.py --any-store --out $OUT/onoff.json > $OUT/onoff.log 2>&1
tail -6 $OUT/onoff.log
timeout 120 python3 -m bench.topk --paths auto --out $OUT > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
