# 2026-12-04 (second session) call 1, issue 26 item 4: a served call found through the guard index
# (indexer_logits._call_key) against the exact key, same process, beside DeepGEMM 477618c.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 200 python3 -m pytest -q -m gpu tests/test_fastpath_gpu.py tests/test_direct_launch.py tests/test_fastpath.py -p no:cacheprovider -rfEX > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 3 $OUT/gpu_tests.log
python3 -m bench.fastpath --number 20000 --repeat 5 > $OUT/fastpath.log 2>&1; tail -n 4 $OUT/fastpath.log
wait $BUILD; tail -n 2 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 200 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"; tail -n 14 $OUT/eager.log
