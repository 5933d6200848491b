# Device call 3 (right after call 2; its predictions are there): the 64x131072 bucket re-tuned with
# FIT, OWN_PDL and MERGE in the space (152 settings), and the 256x65536 bucket (prefill blocks of
# 64K-key rows; tiles tried there since 2026-12-05) tuned for the first time.
# Predicted (2026-12-05, before any run): 64x131072 keeps tiles, with MERGE and OWN_PDL on if call 2
# reads them 1% or more faster; 256x65536: tiles with MERGE within 0.9-1.0 of rounds (both measured
# 141 us at 204 x 64K before MERGE), so an entry for tiles only if MERGE takes 3% or more off it.
set -x
# --fresh retunes the listed buckets and keeps the table's others (since 2026-12-05; it dropped them before)
timeout 500 python3 cli.py tune-topk --fresh --buckets 64x131072,256x65536 --trials $OUT/topk_trials.jsonl \
  > $OUT/tune_topk.log 2>&1
tail -5 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
# kept on the machine for call 4 (back to back: /tmp lasts while the machine stays warm)
cp indexer_logits/tables/nvidia_h200/topk.json /tmp/topk_table_call3.json
