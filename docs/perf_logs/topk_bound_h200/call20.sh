# Device call 20 (2026-12-05, eleventh session; an H100): the runtime now asks the logits epilogue of modules
# that store per tile for at most 16 rows of 256K keys or more (indexer_logits._tile_max_rule, from calls 18
# and 19). The top-k GPU tests; the 1 x 1M decode bucket re-tuned over rounds and bound (timed as served:
# bound now takes its maxima from the epilogue there); bench.topk with bound and rounds beside auto.
# Predicted (before the run): every test passes; the tuner keeps bound at 1 x 1M (~19 us against rounds'
# 23), and auto reads ~1.36 there (1.40-1.44 before); the other decode shapes as in call 16.
set -x
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 150 python3 cli.py tune-topk --fresh --buckets 1x1048576 --paths rounds,bound --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -9 $OUT/tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/topk_table.json
timeout 150 python3 -m bench.topk --paths auto,bound,rounds --skip-prefill --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -6 $OUT/bench_topk.log
