# Device call 18 (2026-12-05, eleventh session; an H100): what the logits epilogue's maxima would save where the
# logits modules store per tile (the H100's family defaults; the runtime asks run-store modules only):
# epilogue_onoff.py --any-store, bound forced where the table serves neither tiles nor bound (1 x 1M), one
# process, alternated rounds, every row checked first.
# Predicted (before the run): the per-tile epilogue costs the logits kernel more than the 6.5 us of maxima
# and range kernels it saves at 64 x 32K (+8% of 104 us, as the H200's per-tile modules paid), level at
# 64 x 128K, a loss at next_n 2; at 1 x 1M (one row, 4 programs' worth of tiles a program) it may pay.
set -x
timeout 200 python3 docs/perf_logs/topk_epilogue_h200/epilogue_onoff.py --any-store --force bound --rounds 3 \
  --cases 64x32768,64x131072,1x1048576,32x131072n2 --out $OUT/onoff_any_store.json > $OUT/onoff_any_store.log 2>&1
tail -8 $OUT/onoff_any_store.log
