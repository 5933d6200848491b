# Device call 2 (2026-12-07, twenty-third session): the row path's held write pass as one joined prefix sum and
# one sum (_topk_row._write_held) against a step at a time (commit f60bb6c), alternated, then row_phases.py on it.
# Predicted (before the run): call 1 put the write pass at 4.9 us of the 13.1-us program (two steps, each a prefix
# sum and two sums, block-wide behind barriers); one prefix sum and one sum for both: the write pass ~2.5-3 us, the
# kernel 1.5-2.5 us less at 128 x 8K and 64 x 8K (cross-compiled for sm_90 at 16 warps it spills 16 bytes a thread,
# 127 registers and none before: a cost of up to ~0.3 us), every row exact; the other phases as in call 1.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 docs/perf_logs/topk_drain/held_ab.py --out $OUT/call2_held_ab.json > $OUT/call2_held_ab.log 2>&1
echo "ab rc $?"; tail -4 $OUT/call2_held_ab.log
timeout 60 python3 docs/perf_logs/topk_drain/row_phases.py --out $OUT/call2_row_phases.json > $OUT/call2_row_phases.log 2>&1
echo "row phases rc $?"; tail -9 $OUT/call2_row_phases.log
