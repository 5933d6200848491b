# Device call 3 (2026-12-07, twenty-second session), on an H200 only: the H200's top-k standing, last read in the
# seventeenth session (five changes ago: the count's claims without barriers, the early loads, the held row).
# bench.topk before; a fresh tune-topk over the default space (every path, the six default buckets); bench.topk
# after. The tuned table is copied out under $OUT.
# Predicted (before the run), ratio to the logits alone, after the re-tune: 64x32K 1.25-1.30, 64x128K ~1.10,
# 1x1M 1.40-1.45, 128x8K 1.33-1.38, prefill 4096x64K 1.35-1.42, 2048x1M ~1.15 (seventeenth session: 1.35, 1.13,
# 1.49, 1.41; 1.41, 1.15; the H100 gained 0.03-0.09 on the decode cases since, its table re-tuned likewise).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
case "$GPU" in *H200*) ;; *) echo "not an H200: $GPU"; exit 3;; esac
timeout 100 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call3_bench_before.log 2>&1
echo "bench before rc $?"; tail -9 $OUT/call3_bench_before.log
timeout 260 python3 cli.py tune-topk --fresh --trials $OUT/call3_topk_trials.jsonl > $OUT/call3_tune_topk.log 2>&1
echo "tune rc $?"; tail -12 $OUT/call3_tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/call3_topk_table_h200.json
timeout 100 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call3_bench_after.log 2>&1
echo "bench after rc $?"; tail -9 $OUT/call3_bench_after.log
