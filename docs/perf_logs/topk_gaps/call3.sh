# Device call 3 (2026-12-07, twenty-fifth session): a captured decode top-k's workspace zeroed by a kernel of its own
# launched as a programmatic dependent (_topk_workspace.ZERO_BY_PDL) in place of torch.zeros' fill, which in call 1's
# timeline cost 0.8 us and a 2.35 us gap a call in a graph. The GPU test of it (garbage in the captured workspaces
# before each replay), the top-k GPU file's graph tests, then zero_ab.py (decode, graphs of 4 calls, alternated).
# Predicted (before the run): the tests pass; 1.5-2.5 us less a call where a workspace is made (the bound and rounds
# paths: 1 x 1M 69.5 -> 67.5-68.0, 64 x 32K, 64 x 128K, 16 x 256K, 32 x 16K likewise), 128 x 8K level (the row path
# takes no workspace).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q -x tests/test_topk_gpu.py -k "captured or graph or replay" > $OUT/call3_gpu_tests.log 2>&1
echo "tests rc $?"; tail -3 $OUT/call3_gpu_tests.log
timeout 200 python3 docs/perf_logs/topk_gaps/zero_ab.py --rounds 4 --skip-prefill --out $OUT/call3_zero_ab.json > $OUT/call3_zero_ab.log 2>&1
echo "zero rc $?"; grep -v "Warn\|warn" $OUT/call3_zero_ab.log | tail -24
