# 2026-12-04 (second session) call 2, issue 29: the row path remade as one histogram round, then a
# sort of the threshold bin's candidates (the exact key rounds only past CAP candidates): its GPU
# exactness tests, bench.topk beside rounds with a sweep of (bins, cap, block, warps), and the
# crossover of the two paths' selection alone over rows x widths.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -p no:cacheprovider -k row -rfEX > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 2 $OUT/gpu_tests.log
timeout 400 python3 -m bench.topk --paths row,rounds --sweep --crossover --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -n 30 $OUT/bench.log
