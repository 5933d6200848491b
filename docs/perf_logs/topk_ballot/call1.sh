# Device call 1 (2026-12-06, nineteenth session): the keys' count claiming its segment slots (COUNT_BALLOT)
# against the count as served, and its GPU tests.
# Predicted (before the run), from the sm_90 SASS (the served count's step: ~200 instructions a warp and four
# barriers, two of them converting the atomics' addresses and masks through shared memory; claimed: ~190 and
# none): the count's time falls by its barriers' waits, so end to end: decode 64x32K -1.5 to -3 us, 1x1M -0.5
# to -1.5 (two steps a program: its prologue, unchanged, is most of it), 64x128K (rows of 32 keys served) -2 to
# -5, 16x256K -1 to -3, 32x16K -1 to -2, 128x8K (row path) level; prefill 4096x64K -150 to -250 us (the count
# ~30 us a block of 25 -> ~22), 2048x1M -0.5 to -1.5%. 1,024 keys a step within 1 us of 512 at decode. A risk
# named before the run: a claim waits for its atomic's answer (an L2 round trip a step, where the served count's
# atomics are fire-and-forget), so where the count is bound by latency rather than issue, claimed can lose; the
# variant loading a step ahead overlaps that wait with the next step's load: at or below claimed by 0-1 us.
# Every row exact; the GPU tests (the three forms of the count, eager and in a graph, the form asserted) pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 330 python3 docs/perf_logs/topk_ballot/ballot_ab.py --call1 --rounds 4 --out $OUT/call1_ab.json > $OUT/call1_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call1_ab.log
