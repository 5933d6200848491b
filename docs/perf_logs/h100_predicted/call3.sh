# Device call 3 (2026-12-06, seventeenth session): predict's DEFAULT_MARGIN (a bucket keeps the family default
# unless the model's choice is predicted >= 3% faster) put the H100's prefill entries back on the family default
# bt64_tp32_w4_s3_m4_kr (call 2's sweep: it led model 9's choices by 0.4-4.8%, and model 9's tp64 module in the
# top-k's 164-row blocks read 1.63 of the logits where the default had read 1.45). This call: bench.topk with the
# re-predicted table, then the top-k GPU file and the peers' suites under it (call 2 ran the rest).
# Predicted (before the run): decode as call 2 (64x32K ~1.25, 64x128K ~1.09, 1x1M ~1.38, 128x8K ~1.29); prefill
# 4096x64K ~1.45 (the fifteenth session's 1.445-1.49 with the same module), 2048x1M ~1.15; the tests all pass.
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 120 python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
timeout 180 python3 -m pytest -q -m gpu tests/test_topk_gpu.py > $OUT/gpu_tests_topk.log 2>&1
timeout 120 python3 -m pytest -q -m gpu tests/test_peer_suites.py > $OUT/gpu_tests_peers.log 2>&1
tail -3 $OUT/gpu_tests_topk.log
tail -3 $OUT/gpu_tests_peers.log
tail -9 $OUT/bench_topk.log
