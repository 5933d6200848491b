# Device call 1 (written 2026-12-07, twenty-seventh session; reordered in the twenty-eighth). COMPACT_GROUP (a
# compaction program a group of the count's programs' segments) against one each, then the standing (an H200: its
# standing and re-tune instead of the A/B); last, should the call run short, the GPU run of what the twenty-sixth
# session committed without one:
# - tests/test_topk_workspace.py: _topk_workspace._capture_info's call with four NULLs after its three arguments
#   (156afd2), its first GPU run; the test captures two graphs on one stream and replays them at once from garbage.
# - group_ab.py: decode, graphs of 4 calls, alternated 3 rounds, every row checked.
# - (not an H200) tune-topk --fresh --paths bound over 1 x 1M and 64 x 32K, which now tries groups of 4 and 8.
# - bench.topk --paths auto.
# Predicted (before the run): the tests pass. group_ab: 1 x 1M (1,056 count programs, ~3 admitted keys each)
# groups of 4 and 8 0.5-1.5 us less than served (~68.8), 2 within 0.5; 64 x 32K (16 count programs a row) within
# +-0.5 at 2 and 4, 8 up to 1 us slower; 64 x 128K, 16 x 256K, 32 x 16K within +-1; 128 x 8K (row path) level.
# An H100's bench as call 3 of topk_nofill within 1% (64x32K 1.19,
# 64x128K 1.08, 1x1M 1.29, 128x8K 1.24, 4096x64K 1.36, 2048x1M 1.17). An H200: 64x32K 1.25-1.31, 64x128K ~1.09,
# 1x1M 1.36-1.44, 128x8K 1.28-1.34, 4096x64K 1.30-1.36, 2048x1M 1.12-1.16.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
D=docs/perf_logs/topk_compact_group
case "$GPU" in
*H200*)
  timeout 130 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call1_bench_before.log 2>&1
  echo "bench rc $?"; tail -10 $OUT/call1_bench_before.log
  timeout 240 python3 cli.py tune-topk --fresh --trials $OUT/topk_trials_h200.jsonl > $OUT/call1_h200_tune.log 2>&1
  echo "tune rc $?"; tail -12 $OUT/call1_h200_tune.log; cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_h200.json
  ;;
*)
  timeout 200 python3 $D/group_ab.py --rounds 3 --skip-prefill --out $OUT/call1_group.json > $OUT/call1_group.log 2>&1
  echo "group rc $?"; grep -v "Warn\|warn" $OUT/call1_group.log | tail -30
  # the bound path's two decode buckets re-tuned with the groups in the space; the bench below serves that table
  timeout 150 python3 cli.py tune-topk --fresh --paths bound --buckets 1x1048576,64x32768 \
    --trials $OUT/topk_trials_bound.jsonl > $OUT/call1_tune.log 2>&1
  echo "tune rc $?"; tail -4 $OUT/call1_tune.log; cp indexer_logits/tables/nvidia_h100_80gb_hbm3/topk.json $OUT/topk_h100.json
  timeout 130 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call1_bench.log 2>&1
  echo "bench rc $?"; tail -10 $OUT/call1_bench.log
  ;;
esac
timeout 90 python3 -m pytest -q tests/test_topk_workspace.py > $OUT/call1_workspace_tests.log 2>&1
echo "workspace tests rc $?"; tail -2 $OUT/call1_workspace_tests.log
