# Device call 4 (2026-12-06, nineteenth session): the GPU's top-k table re-tuned over the whole default space
# (now 212 settings: 128 bins and the claimed slots in the bound space; the prefix sum's inline atomics on),
# then bench.topk with the new table, decode and prefill.
# Predicted (before the run; an H100 likely, whose table predates 128 bins and the claims): 1x1M takes claims or
# 128 bins, 73.2 -> 70-71.5 us (1.36 -> 1.31-1.33 of the logits); 64x32K ~125-126.5 (1.22-1.24); 64x128K level
# (~1.09); 128x8K (row) level (~1.30); the prefill entry keeps bound, 4096x64K 1.43-1.46, 2048x1M 1.19-1.25.
# Every entry exact (the tuner's gates); the bench's answers checked.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 330 python3 cli.py tune-topk --fresh --trials $OUT/call4_topk_trials.jsonl > $OUT/call4_tune_topk.log 2>&1
echo "tune rc $?"; tail -12 $OUT/call4_tune_topk.log
cp "$(ls -t indexer_logits/tables/*/topk.json | head -1)" $OUT/call4_topk_table.json
timeout 200 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/call4_bench_topk.log 2>&1
echo "bench rc $?"; tail -14 $OUT/call4_bench_topk.log
