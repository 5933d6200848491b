# Device call 1 (2026-12-06, eighteenth session): the bound path's compaction a program a row (ROW_COMPACTION,
# indexer_logits/_topk_bound_finish.py) against a program a chunk (as served by the GPU's table), end to end.
# Predicted (before the run), by row less served:
# - decode 64x32K -2 to -4 us (H200: 1.35 -> ~1.31 of the logits), 1x1M -3 to -5 (1.49 -> ~1.40), 64x128K -1 to -3,
#   16x256K -2 to -4: one program a row reads its ~2.5-3k admitted keys in 1-3 tiles (2 L2 round trips each) and
#   claims no slot by an atomic, where the compaction's program a chunk claims slots and ends on its row's counter
#   (1,024 programs a row at 1x1M) before the row's last program ranks;
# - prefill 4096x64K: -1 to -4% (25 blocks of ~164 rows; 232 registers a program at 8 warps: one an SM, so
#   164 rows take two waves); 2048x1M within +-2%;
# - TAIL_TILE 2048 against 4096: 1x1M slower (1,024 segments of 4 slots: two tiles), the rest level.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py -k "row_compaction or bound or recorded" \
  > $OUT/call1_gpu_tests.log 2>&1; echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 300 python3 docs/perf_logs/topk_row_compaction/row_compaction_ab.py --out $OUT/call1_ab.json \
  > $OUT/call1_ab.log 2>&1; echo "ab rc $?"
cat $OUT/call1_ab.log
