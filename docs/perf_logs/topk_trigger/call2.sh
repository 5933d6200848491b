# Device call 2 (2026-12-06, eighteenth session): the new defaults (TRIGGER None: on for decode calls only; the
# tables' settings unchanged) against TRIGGER off, and (bound decode cases) the served settings at 128 bins.
# Predicted (before the run), from call 1: served less off: decode -0.7 to -2.3 us at the bound and rounds shapes,
# 128x8K (row) level, prefill 4096x64K and 2048x1M level (+-1%: off for prefill blocks); 128 bins on top of the
# served: a further -0.2 to -2 us. Every row exact.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 400 python3 docs/perf_logs/topk_trigger/trigger_ab.py --against-off --rounds 4 --out $OUT/call2_ab.json \
  > $OUT/call2_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call2_ab.log
