# Device call 1 (2026-12-07, twenty-fourth session): the bound path's count by votes (COUNT_VOTE, off by default in
# this commit) against the count as served, end to end (vote_ab.py, alternated, every answer checked), then the
# bound count's GPU tests of the voted forms (exact eagerly and in graphs, the launch's form asserted, the
# sub-segments' contents).
# Predicted (before the run), from the cross-compiled loop (sm_90, 512 keys a step, 4 warps: 127 instructions a
# step and no barrier, against the served prefix sum's 251 and five barriers, the claims' 210 and an answering
# atomic a register) and call 5 of topk_count_step_h100 (a 164-row prefill block's count: 36.6 us as the prefix
# sum then, 21.5 without segments, 15.3 for the keys' load and digits alone):
# - prefill 4096x64K: the count ~33 -> 20-24 us a block, 25 blocks: 200-320 us less, ~1.45 -> 1.39-1.42;
#   2048x1M: its count 2-5% of the call: level to -1%;
# - decode 64x32K -0.5 to -1.5 us, 64x128K and 16x256K (rows of 32 served) -1 to -4 us, 1x1M (claims served)
#   -0.5 to -1 us, 32x16K level to -0.5, 128x8K (row path: a control) level;
# - the voted forms' GPU tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 330 python3 docs/perf_logs/topk_vote/vote_ab.py --rounds 4 --out $OUT/call1_vote_ab.json > $OUT/call1_vote_ab.log 2>&1
echo "ab rc $?"; grep -E "^(decode|prefill)|us " $OUT/call1_vote_ab.log | tail -40
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py -k "voted" > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
