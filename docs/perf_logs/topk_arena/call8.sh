# Device call 8 (2026-12-06, sixteenth session): the workspace's GPU test again after its check read the lengths
# on the CPU (call 7: its assertions on the kept workspace passed, then its reference windows mixed a CUDA and a
# CPU tensor).
# Predicted (before the run): it passes.
set -x
timeout 150 python3 -m pytest -q -m gpu tests/test_topk_workspace.py > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
