# Device call 3 (right after call 2; its predictions are there): the 64x131072 bucket re-tuned with
# FIT, OWN_PDL and MERGE in the space (152 settings), then bench.topk end to end with that table.
set -x
# --fresh retunes the listed bucket and keeps the table's others (since 2026-12-05; it dropped them before)
timeout 300 python3 cli.py tune-topk --fresh --buckets 64x131072 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -5 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
timeout 240 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
