# 2026-12-04 (second session) call 4: after the call key's one walk (skeleton_of + exact_of): every GPU
# test but the tools' own, and bench.eager's GPU test, then bench.eager once more beside DeepGEMM.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 300 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --ignore-glob='tests/test_bench_*' -rfEX --durations=5 > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 2 $OUT/gpu_tests.log
wait $BUILD; tail -n 1 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 120 python3 -m pytest -q -m gpu tests/test_bench_eager.py -p no:cacheprovider -rfEX > $OUT/bench_eager_test.log 2>&1
echo "bench.eager test rc=$?"; tail -n 2 $OUT/bench_eager_test.log
timeout 150 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"; grep -A5 "alternated 5 times" $OUT/eager.log
