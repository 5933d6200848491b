# Device call 1 (2026-12-06, sixteenth session): the GPU tests that did not run after _api._device_sms began
# answering a counted device from its cache (call 12 of topk_prefill_blocks was cut after 103 top-k tests): every
# GPU-marked test but the top-k file and the peers' suites first, then the peers' suites, then the top-k file with
# what is left of the call's limit.
# Predicted (before the run): all pass; the first group in ~120-200 s.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 260 python3 -m pytest -q -m gpu tests/ --deselect tests/test_topk_gpu.py --ignore=tests/test_topk_gpu.py \
    --ignore=tests/test_peer_suites.py --durations=8 > $OUT/gpu_tests_a.log 2>&1
tail -14 $OUT/gpu_tests_a.log
timeout 150 python3 -m pytest -q -m gpu tests/test_peer_suites.py > $OUT/gpu_tests_peers.log 2>&1
tail -3 $OUT/gpu_tests_peers.log
timeout 150 python3 -m pytest -q -m gpu tests/test_topk_gpu.py > $OUT/gpu_tests_topk.log 2>&1
tail -3 $OUT/gpu_tests_topk.log
