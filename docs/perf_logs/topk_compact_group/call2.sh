# Device call 2 (2026-12-07, twenty-eighth session): the compaction's group by the model (COMPACT_GROUP None,
# _topk_bound.group_for: the largest group up to 8 whose programs read at most 256 of the row's k admitted keys,
# a count program's share k over its programs) against 1, with the H100 table as committed before call 1's
# re-tune (no entry names a group, so each serves the model's); then the standing with call 1's re-tuned table.
# Predicted (before the run; call 1's A/B at the groups the model takes; count programs a row at 8 an SM of 132):
# 1 x 1M (1,024 programs: 8) 1.0-1.5 us less than 1, 64 x 32K (16: 2) within +-0.5, 64 x 128K (16: 2 over the
# votes) 0.3-1.2 less, 16 x 256K (64: 8, run as 4 over the votes) 0.5-1.5 less, 32 x 16K (32: 4) 0.5-1.3 less,
# 128 x 8K (row path) level; prefill 4096 x 64K (7 count programs a block row: 1) level, 2048 x 1M (its blocks'
# rows of many count programs: 4 over the votes) level to 1% less.
# The standing: 1 x 1M ~1.27, the rest as call 1's bench within 1-2%.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
D=docs/perf_logs/topk_compact_group
timeout 330 python3 $D/model_ab.py --rounds 3 --out $OUT/call2_model.json > $OUT/call2_model.log 2>&1
echo "model rc $?"; grep -v "Warn\|warn" $OUT/call2_model.log | tail -45
cp $D/call1_topk_h100.json indexer_logits/tables/nvidia_h100_80gb_hbm3/topk.json
timeout 130 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call2_bench.log 2>&1
echo "bench rc $?"; tail -10 $OUT/call2_bench.log
# the bound count's forms on the GPU, the compaction grouped (the model's, 8 over rows of 32 keys) and not
timeout 150 python3 -m pytest -q tests/test_topk_bound_gpu.py > $OUT/call2_gpu_tests.log 2>&1
echo "gpu tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
