# Device call 10: call 9's 64x32K entry (BINS 32, 30.5 us) was timed slower than the built-in choice
# (29.9) at the bucket's start: clock drift between two timings of near-equal settings. The tuner now
# times the best and the built-in alternately (3 rounds) and keeps the best only 2% faster (MARGIN).
# Predicted: 64x32K and 128x8K become built-in entries (no settings); 64x131072 (~4%) and 1x1M (~5%)
# keep their settings.
set -x
timeout 150 python3 cli.py tune-topk --fresh --buckets 64x32768,64x131072,1x1048576,128x8192 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -6 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
timeout 40 python3 cli.py verify-topk > $OUT/verify_topk.log 2>&1
tail -5 $OUT/verify_topk.log
