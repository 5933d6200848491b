# Device call 2: verify --record of the H200 table's decode entries, whose modules were re-emitted from
# the template with tile_max (emit drops a record whose module bytes changed: 192 of 198). Predicted:
# every entry ok, as before (each module's PTX is the one verified: docs/perf_logs/topk_epilogue_ptx/).
set -x
timeout 560 python3 cli.py verify --gpu nvidia_h200 --family decode_paged --no-defaults --record \
  > $OUT/verify.log 2>&1
echo "verify rc $?"
tail -6 $OUT/verify.log
cp indexer_logits/tables/nvidia_h200/dispatch.json $OUT/dispatch.json
