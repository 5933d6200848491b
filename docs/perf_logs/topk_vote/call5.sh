# Device call 5 (2026-12-07, twenty-fourth session): the GPU's top-k table re-tuned over a space that now holds the
# count by votes (eight settings a bound bucket; every other bound setting names the votes off), on a fresh machine
# (given back first, so that an H200 may come). An H200: bench.topk --paths auto before (its standing, last read in
# the seventeenth session), the tune, the bench after. An H100: the tune and the bench after (call 3 is before).
# Predicted (before the run): the prefill bucket (256x64K) keeps the bound path and takes voted settings (its
# count reads ~10 steps a program); the decode buckets keep their forms (64x32K prefix sums, 1x1M claims, 64x128K
# rows or votes within noise); the bench after within noise of call 3 (an H100) at decode and 0-2% less at
# 4096x64K. An H200: before 64x32K 1.27-1.33, 64x128K ~1.10, 1x1M 1.40-1.47, 128x8K 1.30-1.36, 4096x64K
# 1.32-1.37, 2048x1M 1.12-1.16; after the same within 0.02.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
SLUG=$(python3 -c "import torch; from indexer_logits._identity import slugify; print(slugify(torch.cuda.get_device_name()))")
case "$SLUG" in *h200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call5_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call5_bench_before.log;;
esac
timeout 330 python3 cli.py tune-topk --fresh --trials $OUT/call5_topk_trials.jsonl > $OUT/call5_tune_topk.log 2>&1
echo "tune rc $?"; tail -9 $OUT/call5_tune_topk.log
cp indexer_logits/tables/$SLUG/topk.json $OUT/call5_topk_table.json
timeout 110 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call5_bench_after.log 2>&1
echo "bench after rc $?"; tail -9 $OUT/call5_bench_after.log
cp $OUT/after/topk_bench.json $OUT/call5_topk_bench_after.json 2>/dev/null; cp $OUT/before/topk_bench.json $OUT/call5_topk_bench_before.json 2>/dev/null; true
