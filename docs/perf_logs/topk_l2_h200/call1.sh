# Device call 1 (2026-12-04, third session). Predictions, written before the run (docs/PERF.md,
# "Next ideas"): prefill 4096x64K with blocks of 12-24 MiB (48-96 rows, the block left in the
# H200's 50 MiB L2 for the selection's four reads) 1.35-1.45x the logits against 1.68 with the
# default 1/20 blocks (51 MiB); 2048x1M not timed below 16 rows a block. Host: a top-k call
# enqueues its logits call plus four selection launches through JITFunction.run, predicted
# ~60-100 us of host time against ~5-10 us for the logits call alone.
set -x
python3 -m bench.topk --paths auto --scratch-mib 12,24,36,48 --out $OUT > $OUT/topk.log 2>&1
tail -12 $OUT/topk.log
python3 docs/perf_logs/topk_l2_h200/host_topk.py 1000 > $OUT/host_topk.log 2>&1
cat $OUT/host_topk.log | tail -5
