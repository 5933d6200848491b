# Device call 16 (2026-12-05, eleventh session; an H100 if the H200 is not lent): the top-k GPU tests with
# the new built-in choice (pick_path: bound from 2M keys of rows of 32K or more), then bench.topk with
# this GPU's top-k table moved aside: what a GPU never tuned gets (the built-in choice and the modules'
# settings).
# Predicted (before the run): every test passes; without a table, logits + top-k over the logits on an
# H100: 64x32K ~1.31 (bound, its default settings; the table's 1.29), 64x128K ~1.17 (1.16), 1x1M 1.40
# and 128x8K 1.31 (rounds and row, as the table), prefill 4096x64K ~1.50 (1.47), 2048x1M 1.18 (tiles).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
for t in indexer_logits/tables/*/topk.json; do mv "$t" "$t.aside"; done
timeout 150 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_no_table.log 2>&1
tail -9 $OUT/bench_no_table.log
