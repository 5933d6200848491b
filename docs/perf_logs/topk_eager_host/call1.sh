# Device call 1 (2026-12-06, fifteenth session): where a one-block eager top-k call's host time goes (call 10 of
# topk_prefill_blocks: decode 1x4K 111 us, 64x8K 81, prefill 128x8K 118, against 14 for the logits call alone).
# Predicted (before the run): the logits call 15-20 us, the workspace's zeros 8-10, plan_selection 25-40 (the
# table, the settings, 3-5 allocations), the recorded launches 20-30 (their key ~5, the guard ~2, 3-5 direct
# launches); torch's allocations 5-8 a call at ~3 us each.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 docs/perf_logs/topk_eager_host/eager_profile.py --out $OUT/eager_profile.json > $OUT/eager_profile.log 2>&1
tail -60 $OUT/eager_profile.log | grep -v "^$" | tail -56
