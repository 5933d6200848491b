# Device call 3 (2026-12-06, nineteenth session; calls that failed to start had spent ~450 s, so one call does
# three things): (1) the GPU tests of the count's forms and the compaction's; (2) the bound compaction's slot
# atomics and stores inline (COMPACT_INLINE, on by default from this commit) against off; (3) the GPU's top-k
# table re-tuned over the whole default space (212 settings: 128 bins and the claimed slots in the bound space),
# then bench.topk with the new table, decode and prefill.
# Predicted (before the run): (1) 8 forms x 2 shapes x 3 kinds pass, the scores beside the indices too; (2) call
# 2's count lost two of four barriers a step and took 1.1-1.4 us off; cross-compiled, the compaction's step loses
# all ~8 of its barriers, its loop ~25% shorter, one iteration at the decode shapes: inline -0.5 to -2 us at
# 64x32K, 1x1M, 32x16K, 64x128K, 16x256K; 128x8K (row path) level; prefill 4096x64K -25 to -75 us (25 blocks),
# 2048x1M within noise; (3) an H100 likely, whose table predates 128 bins and the claims: 1x1M takes claims or 128
# bins, ~73 -> 69.5-71 us (1.29-1.32 of the logits); 64x32K ~124-126 (1.21-1.23); 64x128K level (~1.09); 128x8K
# (row) level (~1.30); the prefill entry keeps bound, 4096x64K 1.42-1.46, 2048x1M 1.19-1.25. Every row exact.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_topk_bound_gpu.py > $OUT/call3_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call3_gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_ballot/ballot_ab.py --call3 --rounds 4 --out $OUT/call3_ab.json > $OUT/call3_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call3_ab.log
timeout 320 python3 cli.py tune-topk --fresh --trials $OUT/call3_topk_trials.jsonl > $OUT/call3_tune_topk.log 2>&1
echo "tune rc $?"; tail -12 $OUT/call3_tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/call3_topk_table.json
timeout 150 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call3_bench_topk.log 2>&1
echo "bench rc $?"; tail -14 $OUT/call3_bench_topk.log
