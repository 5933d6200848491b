# Device call 1 (2026-12-07, twenty-sixth session). Every machine: the workspace tests (a capture's one workspace,
# garbage in it before replays of two graphs at once). On an H200: its top-k standing with today's code (its table
# of the seventeenth session), then its re-tune over the six default buckets (`tune-topk --fresh`); the table comes
# back under $OUT. On an H100: nofill_ab.py, a fill a call / a fill a capture (KEEP_CAPTURED) / none.
# Predicted (before the run). The tests pass. H200: 64x32K 1.27-1.33, 64x128K ~1.10, 1x1M 1.40-1.47, 128x8K
# 1.30-1.36, 4096x64K 1.30-1.36, 2048x1M 1.12-1.16 (call6.sh of topk_vote). H100: the fill node is ~3.2 us of a
# call (call 1 of topk_gaps); one fill in a graph of 4 calls, 3/4 of it saved: 1 x 1M 71.5 -> 69-70 us, 64 x 32K
# 123 -> 120.5-121.5, none 0.5-1 us under that, 128 x 8K level (the row path takes no workspace).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout 150 python3 -m pytest -q tests/test_topk_workspace.py > $OUT/call1_tests.log 2>&1
echo "tests rc $?"; tail -4 $OUT/call1_tests.log
case "$GPU" in
*H200*)
  timeout 120 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call1_bench_before.log
  timeout 300 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials_h200.jsonl > $OUT/call1_tune.log 2>&1
  echo "tune rc $?"; tail -12 $OUT/call1_tune.log; cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_h200.json
  ;;
*)
  timeout 240 python3 docs/perf_logs/topk_nofill/nofill_ab.py --rounds 4 --skip-prefill --out $OUT/call1_nofill.json > $OUT/call1_nofill.log 2>&1
  echo "nofill rc $?"; grep -v "Warn\|warn" $OUT/call1_nofill.log | tail -30
  ;;
esac
