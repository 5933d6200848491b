# 2026-12-04 (second session) call 1, issue 29: the one-program-a-row selection (_topk_row, path
# "row") on the GPU: its exactness tests, then bench.topk beside the four-kernel path, with a sweep
# of its launch settings on the decode logits.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
timeout 200 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -p no:cacheprovider -k row -rfEX --durations=5 > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 4 $OUT/gpu_tests.log
timeout 330 python3 -m bench.topk --paths row,rounds --sweep --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -n 16 $OUT/bench.log
