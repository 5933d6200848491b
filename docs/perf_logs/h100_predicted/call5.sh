# Device call 5 (2026-12-06, seventeenth session): the H100's predicted table against the family defaults for bf16
# decode (next_n 1, then 2 with what is left of the call), as calls 1 and 4 timed fp8: the table serves bf16 too,
# and the prefill's case (call 1) showed a predicted entry can lose to the default by 3x.
# Predicted (before the run): bf16 next_n 1 geo-mean 0.85-0.95 and next_n 2 0.85-0.95, worst <= 1.08 (bf16 reads
# twice fp8's bytes, so the small buckets' one-tile gains weigh less than fp8's; the H200's fresh bf16 tunes chose
# tp1-tp32 runs where the default runs 4 tiles).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
P=indexer_logits/tables/nvidia_h100_80gb_hbm3/predicted/dispatch.json
timeout 230 python3 -m bench.predicted --shipped defaults --predicted h100_predicted=$P --dtype bf16 --next-n 1 \
  --rounds 3 --total-s 200 > $OUT/predicted_vs_defaults_bf16_n1.log 2>&1
timeout 200 python3 -m bench.predicted --shipped defaults --predicted h100_predicted=$P --dtype bf16 --next-n 2 \
  --rounds 3 --total-s 170 > $OUT/predicted_vs_defaults_bf16_n2.log 2>&1
tail -3 $OUT/predicted_vs_defaults_bf16_n1.log
tail -3 $OUT/predicted_vs_defaults_bf16_n2.log
