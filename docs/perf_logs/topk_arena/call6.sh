# Device call 6 (2026-12-06, sixteenth session): the host time of eager top-k calls the row path serves, the
# workspace skipped against zeroed (workspace_host_ab.py, alternated), and a 64x8K decode call that another path
# serves (a control: both settings give it a zeroed workspace).
# Predicted (before the run): the row path's calls 8-15 us less host time a call (call 2: a torch.zeros cost 11-15
# us of an eager call); the control level (within 3 us); the same indices.
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 docs/perf_logs/topk_arena/workspace_host_ab.py --out $OUT/workspace_host_ab.json > $OUT/workspace_host_ab.log 2>&1
tail -5 $OUT/workspace_host_ab.log
