# Device call 1 (2026-12-07, twenty-third session): drain_probe.py on the 4096 x 64K prefill top-k's logits kernel
# (the module serving its 164-row blocks): one launch over all rows against 25 block launches back to back, the
# tile maxima's epilogue off and on, the grid as emitted (row groups fastest) and transposed (chunks fastest);
# then one block's programs stamped (%globaltimer, %smid) in each order. Then row_phases.py: the row path's program at
# 128 x 8K with %globaltimer read at each phase's end.
# Predicted (before the run):
# - the 25 blocks cost 250-350 us more than one launch without the maxima, 300-450 with them (the earlier probe's
#   282-318 us, and the epilogue's +3%);
# - chunks first: logits equal; one launch and the blocks each within 3% of rows first;
# - one stamped block: span ~175-200 us, programs ~35 us (5 waves), slot use 0.85-0.93, an SM idle 8-15 us on
#   average after its last program; rows first: row groups done at 25 / 50 / 75% of the block's row groups at
#   >= 0.95 of the span (every row's last chunk in the last wave); chunks first: ~0.3 / 0.55 / 0.8 (in order).
# - row_phases at 128 x 8K (held, 64 bins, 16 warps, one program an SM): the program ~11-13 us of a ~14 us kernel;
#   load + range ~2.5, histogram ~2.5-3.5 (16 keys a thread, ~54 instructions each), threshold ~0.5, write pass
#   ~1.5-2 (two block-wide prefix sums), sort ~3-4 (a bitonic sort of 512 int64 over 512 threads, through shared
#   memory), answer + pad ~0.5-1; stamped within 0.5 us of plain; the same indices as plain and as torch.topk.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 docs/perf_logs/topk_drain/drain_probe.py --rounds 5 --out $OUT/call1_drain.json > $OUT/call1_drain.log 2>&1
echo "probe rc $?"; tail -22 $OUT/call1_drain.log
timeout 60 python3 docs/perf_logs/topk_drain/row_phases.py --out $OUT/call1_row_phases.json > $OUT/call1_row_phases.log 2>&1
echo "row phases rc $?"; tail -10 $OUT/call1_row_phases.log
