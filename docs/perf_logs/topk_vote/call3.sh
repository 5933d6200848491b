# Device call 3 (2026-12-07, twenty-fourth session): the votes on by the model (served): the standing
# (bench.topk --paths auto) and the 4096x64K prefill's kernels a block with the votes off and on
# (topk_prefill_blocks/prefill_probe.py), with blocks of 200 rows beside the served 164 (what a smaller segment
# margin could buy within the memory bar).
# Predicted (before the run): bench 4096x64K 1.36-1.40 (call 2: 1.376 alternated), the rest as call 1 of
# topk_standing_inline within 0.03; the count 33 -> 21-25 us a block with the votes, the compaction level (14),
# segments overflowing in no program; blocks of 200 rows 1-3% faster than 164.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 110 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call3_bench.log 2>&1
echo "bench rc $?"; tail -9 $OUT/call3_bench.log
timeout 200 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --variants COUNT_VOTE=0,COUNT_VOTE=1 --block-rows 164,200 --out $OUT/call3_prefill_probe.json > $OUT/call3_prefill_probe.log 2>&1
echo "probe rc $?"; tail -14 $OUT/call3_prefill_probe.log
