# Device call 1 (2026-12-07, twenty-fourth session): the standing with the row path's inline stores (67fec4b), which
# no bench.topk run has read yet. An H200: call 2 of ../topk_retune (the bench, the table re-tuned over today's
# space, the bench again). An H100: bench.topk --paths auto, then the whole top-k GPU file with the inline stores on.
# Predicted (before the run):
# - an H100: 128x8K 1.23-1.26 (call 4 of topk_drain read 1.247 alternated), the rest as call 1 of topk_retune
#   within 0.03 (decode) / 0.04 (prefill): 1.20 / 1.09 / 1.30 / 1.42 / 1.18; every row exact; the tests pass.
# - an H200: before the re-tune 64x32K 1.27-1.33, 64x128K ~1.11, 1x1M 1.40-1.47, 128x8K 1.33-1.38 (1.41 in the
#   seventeenth session, less the row path's ~1.7 us on ~40 us of logits), prefill 1.37-1.43 and 1.13-1.17; after
#   it 0-3% less at the bound decode cases, the rest level.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in
*H200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call1_bench_before.log
  timeout 290 python3 cli.py tune-topk --fresh --trials $OUT/call1_topk_trials.jsonl > $OUT/call1_tune_topk.log 2>&1
  echo "tune rc $?"; tail -9 $OUT/call1_tune_topk.log
  cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call1_topk_table.json
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call1_bench_after.log 2>&1
  echo "bench after rc $?"; tail -9 $OUT/call1_bench_after.log;;
*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call1_bench.log 2>&1
  echo "bench rc $?"; tail -9 $OUT/call1_bench.log
  timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py > $OUT/call1_gpu_tests.log 2>&1
  echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log;;
esac
