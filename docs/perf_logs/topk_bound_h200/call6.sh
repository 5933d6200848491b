# Device call 6 (2026-12-05, tenth session; the H200): call 4's re-tune on the H200, with the bound
# path's tight mapping in the space, then bench.topk (auto, the table it writes) with the profile.
# Predicted (before the run), from the H200's last figures (seventh session: 64x32K 1.46, 64x128K
# 1.24, 1x1M 1.55, 128x8K 1.44; prefill 4096x64K 1.71, 2048x1M 1.16) and the H100's gains in call 4.
# Unlike the H100 (family-default logits modules), the H200's table serves all four decode shapes by
# modules that store once a run, so the logits epilogue writes the bound path's maxima and their
# range: three launches, not five (the tuner times decode through the decode top-k, epilogue in).
# So: bound with SEGMENTS at 64x32768 (~1.33-1.38) and 64x131072 (~1.15-1.20); 1x1048576 bound
# (~1.40-1.45) where three launches beat the rounds' four, else rounds kept (~1.55); 128x8K kept
# (row, ~1.44: no tile of 4+ leaves 2k tiles in 8K keys); bound at the 256x65536 prefill block
# (4096x64K ~1.50); 2048x1M level (~1.16, its 1M-key blocks keep the built-in choice).
set -x
timeout 300 python3 cli.py tune-topk --fresh --buckets 64x32768,64x131072,1x1048576,256x65536:prefill \
  --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -8 $OUT/tune_topk.log
find indexer_logits/tables -name topk.json -newer docs/perf_logs/topk_bound_h200/call6.sh -exec cp {} $OUT/topk_table.json \;
timeout 220 python3 -m bench.topk --paths auto --profile --out $OUT/bench > $OUT/bench_topk.log 2>&1
grep -E "kernel|path|us " $OUT/bench_topk.log | cut -c1-110 | tail -40
tail -9 $OUT/bench_topk.log
