# Device call 6 (2026-12-07, twenty-fourth session): on a fresh machine, in case an H200 comes: its standing with
# today's code (the votes served by the model, its table of the seventeenth session otherwise). Its re-tune (244
# settings, ~4 minutes) does not fit the session's device time left after a failed start (476 s); it is
# `python3 cli.py tune-topk --fresh` there, then the bench again. On an H100 nothing runs (calls 1-5 read the H100).
# Predicted (before the run), an H200: before 64x32K 1.27-1.33, 64x128K ~1.10, 1x1M 1.40-1.47, 128x8K 1.30-1.36,
# 4096x64K 1.30-1.36, 2048x1M 1.12-1.16.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*)
  timeout 110 python3 -m bench.topk --paths auto --out $OUT/before > $OUT/call6_bench_before.log 2>&1
  echo "bench before rc $?"; tail -9 $OUT/call6_bench_before.log
  ;;
esac
