# Device call 1 (2026-12-07, twenty-third session): the GPU's top-k table re-tuned over today's default space, with
# the standing before and after. The H200's table was last tuned in the seventeenth session, the H100's in the
# nineteenth (call 3 of topk_ballot); since then the defaults gained the early trigger's settings, the inline
# compaction, the early loads (decode) and the held row (row path), and neither table has been re-tuned over them.
# (1) bench.topk --paths auto with the committed table; (2) cli.py tune-topk --fresh (six default buckets, every
# path); (3) bench.topk --paths auto with the new table (copied out for committing).
# Predicted (before the run):
# - an H200: (1) 64x32K 1.27-1.31, 64x128K ~1.11, 1x1M 1.38-1.44, 128x8K 1.36-1.40, prefill 4096x64K 1.38-1.45,
#   2048x1M 1.13-1.18 (the seventeenth session's 1.35 / 1.13 / 1.49 / 1.41 / 1.41 / 1.15, less what the H100 gained
#   since); (2) the same paths kept (bound, bound, bound, row, rounds, bound), 128 bins taken at one or more bound
#   buckets; (3) 0-3% less than (1) at the bound decode cases, 128x8K level, the prefills within their 3-4% noise.
# - an H100: (1) call 2 of topk_early's 1.21 / 1.09 / 1.32 / 1.28 / 1.45 / 1.18, each within 0.03; (2) the same
#   paths, the settings within noise of the committed ones; (3) level with (1) within 0.02 (decode) / 0.04 (prefill).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
SLUG=$(python3 -c "import torch; from indexer_logits._identity import slugify; print(slugify(torch.cuda.get_device_name()))")
echo "slug $SLUG"
timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
echo "bench before rc $?"; tail -9 $OUT/call1_bench_before.log
timeout 290 python3 cli.py tune-topk --fresh --trials $OUT/call1_topk_trials.jsonl > $OUT/call1_tune_topk.log 2>&1
echo "tune rc $?"; tail -9 $OUT/call1_tune_topk.log
cp indexer_logits/tables/$SLUG/topk.json $OUT/call1_topk_table.json
timeout 110 python3 -m bench.topk --paths auto --out $OUT/after > $OUT/call1_bench_after.log 2>&1
echo "bench after rc $?"; tail -9 $OUT/call1_bench_after.log
