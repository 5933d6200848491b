# Device call 2 (2026-12-07, twenty-fifth session): pdl_probe.py again, more rounds, and at 2048 x 1M: is call 1's
# pdl_store gain (-96 us against the replica at 4096 x 64K, 1.384 -> 1.362; pdl_start level) more than noise?
# Predicted (before the run): 4096 x 64K pdl_store 60-120 us under the replica, pdl_start within 30 us of it;
# 2048 x 1M (blocks of 102 rows, 20 blocks) pdl_store 50-150 us under the replica (0.1-0.4%).
set -x
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout 150 python3 docs/perf_logs/topk_gaps/pdl_probe.py --rounds 6 --out $OUT/call2_pdl_probe.json > $OUT/call2_pdl_probe.log 2>&1
echo "pdl rc $?"; tail -6 $OUT/call2_pdl_probe.log
timeout 150 python3 docs/perf_logs/topk_gaps/pdl_probe.py --shape 2048x1048576 --rounds 2 --out $OUT/call2_pdl_probe_1m.json > $OUT/call2_pdl_probe_1m.log 2>&1
echo "pdl 1M rc $?"; tail -6 $OUT/call2_pdl_probe_1m.log
