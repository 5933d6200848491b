# Device call 2 (right after call 1): the re-tune with the bound path in the space (and FIT / OWN_PDL,
# topk_fit_h200/call3's), the decode buckets and the 64K prefill block; then the bench with that table.
# Predicted: bound kept at 64x32768, 64x131072, 1x1048576 and 256x65536 where call 1 reads it ahead by
# 2% or more; the row path kept at 128x8192 (bound is not tried there).
set -x
timeout 330 python3 cli.py tune-topk --fresh --buckets 64x32768,64x131072,1x1048576,256x65536:prefill \
  --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -6 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
timeout 240 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
