# Device call 1 of 2 (carry .whl and .t38/paa): the row path's step A/B under Triton 3.6, and the
# first part of Triton 3.8 stashed in /tmp/tparts for call 2 (calls back to back: /tmp lasts while the
# machine stays warm).
# Predicted (before any run): under 3.6, 4,096 within 0-3% of 8,192 at every width (the sweep of
# 2026-12-04 read 15.26 against 15.08 us at 128 x 8K, bins 64, CAP 512, 16 warps); end to end at
# 128 x 8K within 1%.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
mkdir -p /tmp/tparts && cp .t38/paa/* /tmp/tparts/
TRITON_CACHE_DIR=/tmp/tc-3.6 timeout 300 python3 docs/perf_logs/topk_row_block_h200/row_block_ab.py \
  --out $OUT/ab_3.6.json > $OUT/ab_3.6.log 2>&1
tail -7 $OUT/ab_3.6.log
