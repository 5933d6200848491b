# Device call 3 (2026-12-07, twenty-third session): write_parts.py, the row path's kernel with its write pass's
# stores taken out one kind at a time (diagnostic: those variants' answers are wrong), alternated in graphs.
# Predicted (before the run): at 128 x 8K (15.1 us plain) no candidate stores -0.3 to -0.8 us (a few hundred int64
# a row, scattered, and the key packing the compiler then drops), no output stores -0.5 to -1.5 (~1,800 int32 a
# row, 8 keys a thread, each its own masked store), no stores -1 to -2.5; 64 x 8K alike. Less than that says the
# write pass waits on something else (the digits' recomputation, or its wait for the histogram's barrier).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 docs/perf_logs/topk_drain/write_parts.py --out $OUT/call3_write_parts.json > $OUT/call3_write_parts.log 2>&1
echo "parts rc $?"; tail -4 $OUT/call3_write_parts.log
