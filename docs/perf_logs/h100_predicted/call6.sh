# Device call 6 (2026-12-06, seventeenth session): the seven fp8 next_n 1 buckets of 4,096-8,192 tiles where the
# H100's predicted table lost 3.5-4.4% to the family default (call 1: tp16 / tp32 runs, logits stored per tile),
# beside the runs the H200's tuned table chose there (tp8 and tp16, stored once a run): what the decode model
# should have picked on the H100 (docs/PERF.md, "Next ideas": its store term on a slower-memory GPU).
# Predicted (before the run), time / the default bt128_tp4_w4_s2_kr: the predicted tile-store configs 1.03-1.05
# (as call 1); the H200's choices 0.95-0.99 (tp8 sr at 4,096 tiles, tp16 sr at 8,192).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 200 python3 -m bench.sweep --buckets 64x4096:full,32x8192:full,64x8192:full,16x32768:full,4x131072:full \
  --next-n 1 --configs '[
 {"block_t":128,"tiles_per_program":4,"num_warps":4,"num_stages":2,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":8,"num_warps":4,"num_stages":3,"orient":"k_rows","store":"run"},
 {"block_t":64,"tiles_per_program":16,"num_warps":4,"num_stages":3,"orient":"k_rows","store":"run"}]' \
  > $OUT/sweep_decode.log 2>&1
grep -E "us .*% of floor|BEST" $OUT/sweep_decode.log | tail -30
