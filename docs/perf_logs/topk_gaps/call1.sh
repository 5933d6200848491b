# Device call 1 (2026-12-07, twenty-fifth session): 815edea's voted GPU tests (its mend ran under the interpreter
# only), where the top-k calls' time goes between kernels (timeline.py), and the prefill's logits kernels launched
# as programmatic dependents of the block before's compaction (pdl_probe.py).
# Predicted (before the run): the voted tests pass; the 4096 x 64K prefill's ~450 us of gaps (call 3 of topk_vote:
# e2e 6288 against 5842 of kernels) mostly at the boundary the logits kernel starts from (compaction -> ragged, no
# PDL: 8-15 us each of 24), the PDL boundaries (ragged -> round 1 -> count -> compaction) under 2 us each; 1 x 1M in a
# graph: the three selection kernels within 1 us of each other's ends, gaps ~1-2 us in all. pdl_probe: the replica
# within 1% of the served call; pdl_start 2-5 us a block less (50-125 us, 1.37 -> 1.34-1.36), pdl_store 1-2 us more
# than pdl_start; every row as served.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 -m pytest -q -x tests/test_topk_bound_gpu.py -k voted > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 200 python3 docs/perf_logs/topk_gaps/timeline.py --out $OUT/call1_timeline.json > $OUT/call1_timeline.log 2>&1
echo "timeline rc $?"; grep -v Warn $OUT/call1_timeline.log | grep -v "^  _warn" | head -60
timeout 200 python3 docs/perf_logs/topk_gaps/pdl_probe.py --out $OUT/call1_pdl_probe.json > $OUT/call1_pdl_probe.log 2>&1
echo "pdl rc $?"; tail -8 $OUT/call1_pdl_probe.log
