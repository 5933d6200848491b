# Device call 2 (2026-12-06, nineteenth session): the count's prefix sum with its atomics and stores inline
# (COUNT_INLINE), and the count writing columns (COUNT_COLUMNS), against the count as served; the GPU tests of
# every form of the count.
# Predicted (before the run; call 1 said the claims' answering atomics cost more than the barriers they spare,
# but at 1x1M, where few warps claim, the loop without barriers won 2.5 us): inline (two of the step's four
# barriers gone, ~200 -> ~150 instructions a step) -0.5 to -1.5 us at 64x32K and 1x1M, level where rows of 32
# keys serve (64x128K, the prefill blocks); columns (no barrier and no answering atomic in the count's loop; a
# compaction of 80 registers at two steps, 150 at four, where the served one has 56): 1x1M (two steps) -2 to -4
# us, 32x16K (one step) -1 to -2, 64x32K at 8 programs an SM (four steps: 3 compaction programs an SM) 0 to +3,
# at 16 an SM (two steps) -1 to -3 against served, 16 an SM alone within 1 us of served; the prefill blocks
# (more than four steps a program) level with columns on, as they do not read it. Every row exact; the GPU
# tests (seven forms of the count at two shapes, three kinds of scores, eager and replayed) pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py > $OUT/call2_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
timeout 330 python3 docs/perf_logs/topk_ballot/ballot_ab.py --rounds 4 --out $OUT/call2_ab.json > $OUT/call2_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call2_ab.log
