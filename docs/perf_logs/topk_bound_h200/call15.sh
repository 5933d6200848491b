# Device call 15 (2026-12-05, eleventh session): on the H200 at last, if lent: call 11 (the re-tune in the
# narrowed space, bench.topk with the table, verify-topk) and the top-k GPU tests with the new built-in
# choice (bound from 2M keys of rows of 32K or more) and the re-tuned table in place.
# Predicted (before the run), logits + top-k over the logits: bound takes 64x32K (~1.36, from 1.46) and
# 64x128K (~1.15, from 1.24; tiles' entry 73 us, bound ~62) and the 256x64K prefill block (4096x64K ~1.55,
# from 1.71); 1x1M stays rounds (~1.55), 128x8K row (~1.44); every test passes.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 280 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -9 $OUT/tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/topk_table.json  # the table just written (this GPU's)
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
timeout 50 python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -8 $OUT/verify_topk.log
timeout 140 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
