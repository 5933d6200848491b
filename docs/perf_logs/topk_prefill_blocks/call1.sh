# Device call 1 (2026-12-05, thirteenth session): the ragged prefill's tile maxima from the logits kernel's
# epilogue (EPILOGUE, the bound path's first pass: the maxima and range kernels not launched), and why the
# count by rows (COUNT_LANES) lost 10-17% end to end on the 4096x64K prefill (twelfth session, calls 7-8 of
# topk_count_step_h100) while the tuner's prefill bucket timed it 14% faster. prefill_probe.py: end to end,
# host enqueue time, per-kernel time, the segments' fill and overflow, the block's selection in a graph.
# Then the top-k GPU tests (the new epilogue test among them).
# Predicted (before the run), on an H100 (call 17 of topk_bound_h200: per call, logits 4582 us in blocks,
# count 853, tile maxima 450, compaction 401, hist 89, range 71):
# - EPILOGUE: the maxima (~450 us) and range (~71) kernels gone; the logits kernel +1-2% (222 -> 244
#   registers, one program an SM either way; a max over runs of 16 keys and 1/16 more stores a tile):
#   +50-90 us. End to end -350..-420 us: 1.47 -> ~1.39 of the logits.
# - COUNT_LANES: the count's sum falls (~34 -> ~24 us a block), so its loss is elsewhere: the compaction
#   (sub-segments overflowing: overflowed > 0 with lanes) or the host (host us ~ total us with lanes).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 300 python3 docs/perf_logs/topk_prefill_blocks/prefill_probe.py --out $OUT/prefill_probe.json > $OUT/prefill_probe.log 2>&1
tail -22 $OUT/prefill_probe.log
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py -x > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
