# Device call 4 (2026-12-06, sixteenth session): where the decode bar's four cases (64x32K, 64x128K, 1x1M, 128x8K)
# spend their device time, kernel by kernel, the selection's kernels without PDL: for the next session's work on
# the 3.7-5.4 us a call the bar still asks for (call 9 of topk_prefill_blocks: 1.30, 1.12, 1.34, 1.31 of the logits).
# Predicted (before the run): 64x32K bound: the logits kernel with its epilogue ~2-4 us over the logits alone, round
# 1 over the maxima ~2.5, the count ~10, the compaction ~8; 1x1M bound: round 1 ~3, count ~4, compaction ~5, the
# epilogue ~1; 128x8K row: one kernel of ~15-18 us; 64x128K bound with the count by rows: count ~25, compaction ~12.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 docs/perf_logs/topk_arena/decode_parts.py --out $OUT/decode_parts.json > $OUT/decode_parts.log 2>&1
cat $OUT/decode_parts.log | cut -c1-140
