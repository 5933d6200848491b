# Device call 22 (2026-12-05, eleventh session; the H200 if it starts, the last 200 s of device time): bench.topk
# with the committed H200 top-k table (tuned before bound) and the new built-in choice, which now serves the
# H200's prefill blocks of 64K-key rows (no prefill entry there) by bound.
# Predicted (before the run): decode as the seventh session's (1.46 / 1.24 / 1.55 / 1.44: the table's entries
# serve them), prefill 4096x64K ~1.55 (from 1.71), 2048x1M ~1.16 (tiles, as before).
set -x
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 110 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
