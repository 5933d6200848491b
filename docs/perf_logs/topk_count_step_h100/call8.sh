# Device call 8 (2026-12-05, twelfth session; the last ~490 s of device time, on whichever GPU comes): the
# top-k re-tune with the count by rows (COUNT_LANES) in the space (164 settings over the six default buckets),
# then bench.topk with the table it wrote. On an H200 this is the re-tune call 15 of topk_bound_h200 waited
# for (the H200's table predates the bound path).
# Predicted (before the run): bound wins 64x32K, 64x128K and the 256x64K prefill block on either GPU; lanes
# wins 64x128K only (10-14 us); on an H200 64x32K ~1.36, 64x128K ~1.13, 4096x64K ~1.5.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 250 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -9 $OUT/tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/topk_table.json
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
