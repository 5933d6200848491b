# Device call 1 (2026-12-06, twentieth session): the row path's candidates ranked by a second histogram of 64
# sub-bins over their keys, the last sub-bin's few pairwise (_topk_row.SUB, on), against the one tl.sort of CAP
# (512 at 128 x 8K) it replaces; then the top-k GPU file's row-path tests (the device time left after failed starts
# does not hold the whole file).
# Predicted (before the run): the sort of 512 int64 is ~3-4 us of the row kernel's ~15 (the selection alone grew
# 4 us from 512 to 1,024 candidates and 16 more to 2,048: n log^2 n); the sub-bins cost about one histogram of one
# key a thread, three scans and a [32, 32] compare: 128x8K -1.5 to -3 us end to end (H100: 70.5 -> 67.5-69,
# 1.29 -> 1.24-1.27 of the logits), 64x8K likewise where the row path serves it, SUB 32 within 0.5 us of 64; the
# bound cases level (controls). Every row exact; the row tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 80 python3 docs/perf_logs/topk_row_sub/sub_ab.py --rounds 4 --out $OUT/call1_ab.json > $OUT/call1_ab.log 2>&1
echo "ab rc $?"; cat $OUT/call1_ab.log
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py -k row > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -4 $OUT/call1_gpu_tests.log
