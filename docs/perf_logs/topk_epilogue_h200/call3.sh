# Device call 3: after call 1, the runtime asks the epilogue of logits modules that store per run only
# (the per-tile form cost the logits kernel +45 us at 128 x 128K and +51 us at next_n 2, 32 x 128K:
# call 1 and its inline check). Predicted: 64 x 128K as in call 1 (~346 us, 1.245), 32 x 128K next_n 2
# and 128 x 128K level between the two columns (the module does not write the maxima: both are the
# path's own pass, 245 and 674 us as in call 1); the epilogue GPU test passes for next_n 1 and 2.
set -x
# (run as -k "epilogue", which names no test: 76 deselected; then, on the same machine, -k "tile_maxima":
# 2 passed. The test is test_decode_topk_takes_the_tile_maxima_from_the_logits_kernel; call 1's -k did not
# select it either.)
timeout 120 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tile_maxima" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_epilogue_h200/epilogue_onoff.py --rounds 3 --out $OUT/onoff.json > $OUT/onoff.log 2>&1
tail -6 $OUT/onoff.log
