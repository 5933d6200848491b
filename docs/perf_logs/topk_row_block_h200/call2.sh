# Device call 2 of 2 (carry .whl and .t38/pab, right after call 1): Triton 3.8 unpacked, then the
# row path's step A/B under it.
# Predicted (before any run): under 3.8, 8,192 spills 68-72 bytes a thread in the step loop and
# 4,096 none (cross-compiled): 4,096 5-20% faster at every width, end to end at 128 x 8K 2-6%.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
cp .t38/pab/* /tmp/tparts/ && mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || exit
export PYTHONPATH=/tmp/triton-3.8.0:/tmp/site:$PWD
python3 -c "import triton; print('triton', triton.__version__, triton.__file__)"
TRITON_CACHE_DIR=/tmp/tc-3.8 timeout 400 python3 docs/perf_logs/topk_row_block_h200/row_block_ab.py \
  --out $OUT/ab_3.8.json > $OUT/ab_3.8.log 2>&1
tail -7 $OUT/ab_3.8.log
