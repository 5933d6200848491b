# 2026-12-04 (second session) call 5: the replay's output allocation (new_empty of an empty tensor, sizes
# as ints): the fast-path, dtype and peer GPU tests, then bench.eager beside DeepGEMM.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 150 python3 -m pytest -q -m gpu tests/test_fastpath_gpu.py tests/test_logits_dtype.py tests/test_direct_launch.py tests/test_peer_suites.py -p no:cacheprovider -rfEX > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 1 $OUT/gpu_tests.log
wait $BUILD; tail -n 1 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 150 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"; grep -A5 "alternated 5 times" $OUT/eager.log
