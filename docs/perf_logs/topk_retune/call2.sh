# Device call 2 (2026-12-07, twenty-third session): call 1's re-tune where an H200 comes (call 1 got an H100), then
# call 1 of ../topk_drain. Prediction for the H200: call 1's (at its head).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call2_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call2_bench_before.log
  timeout 290 python3 cli.py tune-topk --fresh --trials $OUT/call2_topk_trials.jsonl > $OUT/call2_tune_topk.log 2>&1
  echo "tune rc $?"; tail -9 $OUT/call2_tune_topk.log
  cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call2_topk_table.json
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call2_bench_after.log 2>&1
  echo "bench after rc $?"; tail -9 $OUT/call2_bench_after.log;;
esac
bash docs/perf_logs/topk_drain/call1.sh
