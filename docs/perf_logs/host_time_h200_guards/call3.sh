# 2026-12-04 (second session) call 3: the GPU tests but the tools' own (every entry point now finds its
# launch through the guard index), the peer suites, then bench.eager with ours and DeepGEMM's calls
# alternated five times per case (issue 26, item 4).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 330 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --ignore-glob='tests/test_bench_*' -rfEX --durations=8 > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 3 $OUT/gpu_tests.log
wait $BUILD; tail -n 1 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 220 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"; grep -A5 "alternated 5 times" $OUT/eager.log
