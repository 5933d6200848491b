# Device call 1 (2026-12-06, eighteenth session): the selection's kernels before its last letting the next one
# launch at their start (TRIGGER: griddepcontrol.launch_dependents after their own gdc_wait), so that the next
# kernel's programs are resident and waiting when this one ends; without it (as served) a dependent launches as
# the kernel's programs exit. Nsight Compute (../topk_ncu) put a near-empty selection kernel at ~4 us of which
# ~0.4 us on the SMs.
# Predicted (before the run), trigger less served: decode bound (two triggered links: round 1 -> count ->
# compaction) -1 to -4 us at 64x32K, 1x1M, 64x128K, 16x256K; 32x16K likewise on its path; 128x8K (row path, one
# kernel) level; prefill 4096x64K -25 to -100 us of ~6.3 ms (25 blocks, two links each), 2048x1M level (+-0.5%).
# Every row exact; the GPU tests of every path with TRIGGER on pass. Also (settings only), the bound decode cases at
# 128 bins (the tuner tries 32 and 64): -0.5 to -1.5 us (one tile of candidates to rank, a tighter bound).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -c "
import sys, pytest
import indexer_logits._topk_select as S
S.TRIGGER = True
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_topk_gpu.py', '-k',
                      'decode_topk_exact and (bound or rounds or tiles) or ragged_topk_takes']))
" > $OUT/call1_gpu_tests_trigger.log 2>&1; echo "tests rc $?"; tail -3 $OUT/call1_gpu_tests_trigger.log
timeout 330 python3 docs/perf_logs/topk_trigger/trigger_ab.py --rounds 4 --out $OUT/call1_ab.json > $OUT/call1_ab.log 2>&1
echo "ab rc $?"
cat $OUT/call1_ab.log
