# Device call 1 (2026-12-06, seventeenth session): the H100's predicted table (`cli.py predict --gpu h100_sxm`,
# committed under indexer_logits/tables/nvidia_h100_80gb_hbm3/predicted/) against the family defaults the H100
# was served before, and the top-k bar's cases with it. If an H200 is lent instead: call 23 of
# topk_bound_h200 (its top-k table re-tuned, bench.topk, verify-topk), which has waited for one since.
# Predicted (before the run), H100:
# - logits, predicted / defaults, fp8 decode next_n 1 (bench.predicted --shipped defaults): geo-mean 0.80-0.88
#   (the H200's defaults ran 1.26x its tuned table; the blind predicted H200 table was within 1% of it), the
#   largest gains at B <= 4 and at 16,384 tiles, worst <= 1.05;
# - bench.topk --paths auto with the predicted table: the logits faster (64x32K ~106 -> ~90 us), the selection
#   at 64 rows without its own maxima and range (run-store modules write them: -6.6 us at 64x32K, -16 at
#   64x128K), so the ratios: 64x32K ~1.27-1.30 (was 1.292), 64x128K ~1.08 (1.12), 1x1M ~1.38-1.42 (1.348: the
#   same selection over faster logits), 128x8K ~1.32-1.35 (1.298, likewise); prefill unchanged (~1.45, 1.15).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
if echo "$GPU" | grep -q H200; then
  bash docs/perf_logs/topk_bound_h200/call23.sh
  exit
fi
python3 -c "from indexer_logits import _tables; print(_tables.serving_table('$GPU', '9.0', _tables.TABLES_DIR))"
timeout 250 python3 -m bench.predicted --shipped defaults \
  --predicted h100_predicted=indexer_logits/tables/nvidia_h100_80gb_hbm3/predicted/dispatch.json \
  --next-n 1 --rounds 3 --total-s 220 > $OUT/predicted_vs_defaults.log 2>&1
timeout 200 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -12 $OUT/bench_topk.log
tail -8 $OUT/predicted_vs_defaults.log
