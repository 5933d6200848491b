# Device call 2 (2026-12-07, twenty-fourth session): call 1 ran the votes with a bug where the table's or the model's
# rows of 32 keys were on too (64x128K, 16x256K: the count was told LANES_ as well, so its early first step was
# never loaded; every row wrong there, and the GPU test of that form caught it). Fixed: the votes turn the rows off.
# Now COUNT_VOTE is None by default: on where the count's programs read 8 steps or more (_topk_bound.votes_for).
# vote_ab.py --call2: the votes off, the served default, the votes on everywhere, alternated; then the bound
# path's GPU tests (every form) and the top-k GPU file's bound and prefill tests.
# Predicted (before the run): served = votes on at 64x128K (16 steps), 16x256K (8) and both prefills, = votes off
# at 64x32K, 1x1M, 32x16K; 64x128K and 16x256K 0-2 us faster with the votes than off (call 1's -1.2 / -1.0 us were
# wrong answers, not timings to trust); 4096x64K 1.40-1.42 -> 1.36-1.38 (call 1: 1.410 -> 1.369); every row exact;
# the tests pass.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 330 python3 docs/perf_logs/topk_vote/vote_ab.py --call2 --rounds 4 --out $OUT/call2_vote_ab.json > $OUT/call2_vote_ab.log 2>&1
echo "ab rc $?"; grep -E "^(decode|prefill)|us " $OUT/call2_vote_ab.log | tail -40
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py > $OUT/call2_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call2_gpu_tests.log
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_topk_gpu.py -k "bound or prefill or ragged or chunked or memory" > $OUT/call2_gpu_tests_topk.log 2>&1
echo "topk tests rc $?"; tail -3 $OUT/call2_gpu_tests_topk.log
