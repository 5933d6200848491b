# Device call 8 (2026-12-05, tenth session; an H100: the H200 not lent). Call 7 (H100): the resident path
# exact (12 GPU tests; one failed on its own table of launch counts, which lacked "resident") and slower
# than the serving choice at every decode shape (logits + top-k over the logits: 64x32K 1.55 against
# 1.28, 64x128K 1.51 against 1.16, 1x1M 1.52 against 1.41, 128x8K 1.60 against 1.30): predicted 1.15-1.23.
# Two suspects: (1) its programs, one an SM at 8 warps, re-read their chunk a step of 2,048 keys at a
# time each phase with few loads in flight (the four kernels run 8 programs an SM); (2) as a
# programmatic dependent launch its programs (124 registers x 256 threads: half an SM's registers) sit
# on the SMs while the logits kernel runs, which then has half the registers for its own programs.
# Changed: a chunk of one step is held in registers through the phases (HOLD_: 8,192 keys at 16 warps,
# 103 registers, no spill). resident_ab.py times the selection alone and end to end, PDL on and off.
# Predicted: held, the selection alone at 1x1M and 128x8K ~10 us (rounds ~23, row ~17); PDL off
# costs the end to end ~2 us where (2) is not the cause, and saves >10 us where it is.
set -x
timeout 200 python3 -m pytest -q tests/test_topk_gpu.py -k resident > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 300 python3 docs/perf_logs/topk_bound_h200/resident_ab.py > $OUT/resident_ab.log 2>&1
tail -30 $OUT/resident_ab.log
