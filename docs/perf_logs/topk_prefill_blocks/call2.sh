# Device call 2 (2026-12-05, thirteenth session), after call 1 found the count by rows (COUNT_LANES) losing
# through the block's rows (its doubled segments count in the scratch budget: blocks of 142 rows, 29 blocks,
# the logits in blocks 5125 us against 4613 for 25 blocks of 164) while its count was faster (34.3 -> 26.8 us a
# block). Are the blocked logits bound by whole waves of the ragged kernel? Its grid is (rows / 4) x 32 chunks
# at 64K keys, 222 registers at 4 warps: two programs an SM, 264 a wave, so 33 rows a wave: 132 rows are 4
# whole waves, 165 five, 198 six; 164 (4.97) nearly five; 142 (4.3) wastes most of a fifth.
# Predicted (before the run): with lanes off and on, blocks of 132, 165 and 198 rows take the logits in blocks
# within ~2-3% of the whole call's (4331 us); lanes at the same rows ~190 us faster end to end (1.49 -> ~1.44).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 400 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --block-rows 132,142,165,198 --out $OUT/prefill_probe.json > $OUT/prefill_probe.log 2>&1
tail -14 $OUT/prefill_probe.log
