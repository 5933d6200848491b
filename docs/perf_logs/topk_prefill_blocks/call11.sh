# Device call 11 (2026-12-06, fifteenth session; on call 10's warm machine, no prediction written before it: a
# sweep to place the scratch floor that call 9 set at 48 MiB): the least scratch a prefill top-k call's blocks
# take, 32 / 48 / 64 / 96 MiB, at three host-bound shapes (logits of 256 MiB), alternated in one process. (A first
# try failed on its arguments: 16384 x 4096 has more rows than keys; this is the second.)
python3 docs/perf_logs/topk_prefill_blocks/host_profile.py --shapes 8192x8192,2048x32768,4096x16384 \
  --variants SHARE_PLANS=1+SCRATCH_FLOOR_MIB=32,SHARE_PLANS=1+SCRATCH_FLOOR_MIB=48,SHARE_PLANS=1+SCRATCH_FLOOR_MIB=64,SHARE_PLANS=1+SCRATCH_FLOOR_MIB=96 \
  --out $OUT/host_profile.json > $OUT/host_profile.log 2>&1
