# Device call 2 (2026-12-06, seventeenth session): model 9 (the prefill body's terms fit to the H200's stored
# prefill trials) re-predicted the H100's prefill entries: ragged fp8 bt64_tp64_w4_s4_m4_kr (8K, 16K, 64K) and
# bt64_tp32_w4_s4_m4_kr (32K), in place of model 8's bt64_tp8_w8_s4_m4 (q_rows), which call 1 timed at 3.0x the
# family default (13.2 against ~4.4 ms at 4096 x 64K). This call: the ragged configs side by side (bench.sweep),
# bench.topk with the new table, and the GPU tests outside the top-k file and the peers' suites under the H100's
# predicted table (call 3: those two).
# Predicted (before the run): the sweep: model 9's choices within 0.97-1.03 of the default bt64_tp32_w4_s3_m4_kr,
# model 8's ~3.0x; bench.topk: prefill 4096x64K logits ~4.4 ms again and ratio ~1.45 (as with the defaults), 2048x1M
# ~1.15; decode as call 1 (64x32K ~1.23, 64x128K ~1.09, 1x1M ~1.39, 128x8K ~1.31); the GPU tests all pass.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 150 python3 -m bench.sweep --family prefill_ragged --buckets 4096x16384,4096x65536 --configs '[
 {"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":3,"block_m":4,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":64,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":32,"num_warps":4,"num_stages":4,"block_m":4,"orient":"k_rows"},
 {"block_t":64,"tiles_per_program":8,"num_warps":8,"num_stages":4,"block_m":4,"orient":"q_rows"}]' \
  > $OUT/sweep_ragged.log 2>&1
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
timeout 250 python3 -m pytest -q -m gpu tests/ --ignore=tests/test_topk_gpu.py --ignore=tests/test_peer_suites.py \
  --durations=8 > $OUT/gpu_tests_a.log 2>&1
tail -16 $OUT/gpu_tests_a.log
tail -9 $OUT/bench_topk.log
tail -14 $OUT/sweep_ragged.log
