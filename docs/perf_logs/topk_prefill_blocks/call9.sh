# Device call 9 (2026-12-06, fifteenth session): after call 8. (1) The H100 table's prefill entry as call 8's
# re-tune kept it (bound, 8 programs an SM, the count by rows off: 99.5 us a 256-row block as served, against
# 102.9 for the built-in bound with the count by rows) against the entry it replaced (16 programs an SM, the
# count by rows from the model), alternated in one process (entry_ab.py). (2) bench.topk with it and with the
# shared plan's maxima no longer allocated beside the logits kernel's (call 8: 65.9 MiB, 0.0644 of the logits, over
# the bar's 1/16). (3) host_profile.py again at host-bound shapes, the blocks' plans shared or not, and
# fewer, larger blocks there (SCRATCH_FLOOR 48 MiB).
# Predicted (before the run), an H100: (1) level to 1% faster end to end (the selection is ~1.4 ms of ~6.4 ms, 3% of
# it is ~40 us); (2) decode as call 8 within 1-2%, prefill 4096x64K ~1.45 with extra memory ~63.3 MiB (0.0618 of the
# logits), 2048x1M ~1.20; (3) 8192 x 8K end to end 15-20% faster with the plans shared (call 8: 2323 -> 1909 us),
# 2048 x 32K (16 blocks of 128 rows, the bound path) 5-15% faster; with a 48 MiB floor on a call's scratch (in place
# of 16: 6 blocks at either shape) both are device-bound and 20-40% faster again.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 120 python3 docs/perf_logs/topk_prefill_blocks/entry_ab.py --out $OUT/entry_ab.json > $OUT/entry_ab.log 2>&1
tail -4 $OUT/entry_ab.log
timeout 200 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -10 $OUT/bench_topk.log
timeout 120 python3 docs/perf_logs/topk_prefill_blocks/host_profile.py --shapes 8192x8192,2048x32768 \
  --variants RAGGED_EPILOGUE=1+SHARE_PLANS=0,RAGGED_EPILOGUE=1+SHARE_PLANS=1,RAGGED_EPILOGUE=1+SHARE_PLANS=1+SCRATCH_FLOOR_MIB=48 --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
tail -5 $OUT/host_profile.log
