# Device call 4 (after call 3, with its table: copy $OUT/topk_table.json of call 3 to
# indexer_logits/tables/nvidia_h200/topk.json first): bench.topk end to end, decode and prefill.
# Predicted (2026-12-05): decode 64 x 128K 1.24-1.26 of the logits with MERGE, FIT and OWN_PDL on;
# prefill 4096 x 64K 1.65-1.71 (served by the 256x65536 entry); the other shapes as call 1 read them
# but 128 x 8K (the row path's step of 4,096: level under Triton 3.6, within 1%).
set -x
# call 3's table, where the machine is still the one call 3 ran on; else the committed table
test -f /tmp/topk_table_call3.json && cp /tmp/topk_table_call3.json indexer_logits/tables/nvidia_h200/topk.json
timeout 300 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
