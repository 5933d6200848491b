# Device call 4 (2026-12-06, seventeenth session): the peers' suites again, after their kernel check learned the
# "predicted" rung (call 3: 61 failures, each a call the H100's predicted table served, which the check's list of
# kernel rungs lacked; 3 of them out of memory after the failures before them); and bench.predicted for next_n 2
# (the H100's predicted table against the family defaults; call 1 timed next_n 1: 0.882).
# Predicted (before the run): the peers' suites 175 passed; next_n 2 geo-mean 0.80-0.90 (the family default
# bt64_tp4_w4_s2_kr at next_n 2 runs 4 tiles a program where the H200's tuned table runs 8-32).
set -x
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
timeout 120 python3 -m pytest -q -m gpu tests/test_peer_suites.py > $OUT/gpu_tests_peers.log 2>&1
timeout 250 python3 -m bench.predicted --shipped defaults \
  --predicted h100_predicted=indexer_logits/tables/nvidia_h100_80gb_hbm3/predicted/dispatch.json \
  --next-n 2 --rounds 3 --total-s 220 > $OUT/predicted_vs_defaults_n2.log 2>&1
tail -3 $OUT/gpu_tests_peers.log
tail -4 $OUT/predicted_vs_defaults_n2.log
