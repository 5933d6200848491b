# Device call 1 (2026-12-07, twenty-fifth session): 815edea's voted GPU tests (its mend ran under the interpreter
# only), then where the top-k calls' time goes between kernels (timeline.py), and on an H200 its standing.
# Predicted (before the run): the voted tests pass; the 4096 x 64K prefill's ~450 us of gaps (call 3 of topk_vote:
# e2e 6288 against 5842 of kernels) mostly at the boundary the logits kernel starts from (compaction -> ragged, no
# PDL: 8-15 us each of 24), the PDL boundaries (ragged -> round 1 -> count -> compaction) under 2 us each; 1 x 1M in a
# graph: the three selection kernels within 1 us of each other's ends, gaps ~1-2 us in all.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 -m pytest -q -x tests/test_topk_bound_gpu.py -k voted > $OUT/call1_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests.log
timeout 200 python3 docs/perf_logs/topk_gaps/timeline.py --out $OUT/call1_timeline.json > $OUT/call1_timeline.log 2>&1
echo "timeline rc $?"; grep -v Warn $OUT/call1_timeline.log | head -70
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_h200.log 2>&1
  echo "bench rc $?"; tail -9 $OUT/call1_bench_h200.log
  ;;
esac
