# Device call 5 (2026-12-06, fourteenth session; split from call 4 to fit the device time left): tune-topk's
# prefill bucket, now timed as fp8_mqa_topk serves a block of rows (the ragged logits kernel writing the bound
# path's maxima), less its logits call, in CUDA graphs.
# Predicted (before the run): it runs in CUDA graphs, every trial exact, and keeps bound, ~60-80 us over the
# logits of a 256-row block (the selection alone, with its own first pass, read 108.5 us with lanes).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 cli.py tune-topk --fresh --buckets 256x65536:prefill --paths bound,rounds --out $OUT/tables --trials $OUT/prefill_trials.jsonl > $OUT/tune_prefill.log 2>&1
tail -6 $OUT/tune_prefill.log
