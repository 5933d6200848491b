# Device call 11 (2026-12-05, eleventh session): the H200's top-k table re-tuned in the narrowed space
# (148 settings over the six default buckets, bound and resident among them: tuner/topk_tune.space),
# then bench.topk with it (decode in CUDA graphs, prefill eager, logits alone beside) and verify-topk.
# Predicted (before the run): bound takes 64x32K (ratio ~1.33, from 1.46), 64x128K (~1.15, from 1.24)
# and the 256x64K prefill block (4096x64K ~1.5, from 1.71); 1x1M stays rounds (~1.5), 128x8K row
# (~1.44); resident wins nothing. If the tune is cut by its limit the table keeps the buckets done.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 320 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -9 $OUT/tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/topk_table.json  # the table just written (this GPU's)
timeout 160 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
timeout 90 python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -8 $OUT/verify_topk.log
