# Device call 2: the selection's launches recorded per key and replayed (indexer_logits._recorded_launches).
# Predicted (written before the run): a top-k call's host time from ~330 us to 50-70 us (its logits
# call ~21 us, the workspace and candidate allocations ~6, the key ~5, four direct launches ~5 each);
# then the L2 experiment again: 4096x64K blocks of 24 MiB no longer host-bound, 1.35-1.45x the logits.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py tests/test_fastpath_gpu.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_l2_h200/host_topk.py 1000 > $OUT/host_topk.log 2>&1
tail -3 $OUT/host_topk.log
python3 -m bench.topk --paths auto --scratch-mib 12,24,36,48 --out $OUT > $OUT/topk.log 2>&1
tail -16 $OUT/topk.log
