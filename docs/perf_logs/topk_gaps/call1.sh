# Device call 1 (2026-12-07, twenty-fifth session): 815edea's voted GPU tests (its mend ran under the interpreter
# only) and the bound file's GPU tests with the count skipping the tiles below its bound (COUNT_SKIP); where the
# top-k calls' time goes between kernels (timeline.py); the prefill's logits kernels launched as programmatic
# dependents of the block before's compaction (pdl_probe.py); COUNT_SKIP end to end (skip_ab.py).
# Predicted (before the run): the tests pass; the 4096 x 64K prefill's ~450 us of gaps (call 3 of topk_vote: e2e
# 6288 against 5842 of kernels) mostly where a block's logits kernel starts (compaction -> ragged, no PDL: 8-15 us
# each of 24), the PDL boundaries under 2 us each; 1 x 1M in a graph: gaps ~1-2 us in all. pdl_probe: the replica
# within 1% of the served call; pdl_start 2-5 us a block less (1.37 -> 1.34-1.36), pdl_store 1-2 us less again.
# skip_ab: the prefill's count (24.4 us a block, its keys read at ~2.9 TB/s) reads about half its keys: 4096 x 64K
# 1.37 -> 1.33-1.35, 2048 x 1M 1.17 -> 1.14-1.16, 64 x 128K -3 to -6 us; the few-step decode cases (served off) +0-1
# us with it on; every row exact.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q -x tests/test_topk_bound_gpu.py -k "voted or skip" > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 150 python3 docs/perf_logs/topk_gaps/timeline.py --out $OUT/call1_timeline.json > $OUT/call1_timeline.log 2>&1
echo "timeline rc $?"; grep -v Warn $OUT/call1_timeline.log | grep -v "^  _warn" | head -60
timeout 150 python3 docs/perf_logs/topk_gaps/pdl_probe.py --rounds 4 --out $OUT/call1_pdl_probe.json > $OUT/call1_pdl_probe.log 2>&1
echo "pdl rc $?"; tail -7 $OUT/call1_pdl_probe.log
timeout 200 python3 docs/perf_logs/topk_gaps/skip_ab.py --rounds 3 --out $OUT/call1_skip_ab.json > $OUT/call1_skip_ab.log 2>&1
echo "skip rc $?"; tail -22 $OUT/call1_skip_ab.log
