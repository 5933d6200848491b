# 2026-12-04 call 1: the GPU tests (all but the peer suites) on the committed table, DeepGEMM built beside;
# issue 27: the warp-specialised Gluon next_n 2 experiment against the shipped kernel and DeepGEMM;
# issue 26: host time per eager call beside DeepGEMM.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 260 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --ignore=tests/test_peer_suites.py -rfEX --durations=12 > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 3 $OUT/gpu_tests.log
wait $BUILD; tail -n 2 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 170 python3 experiments/gluon_decode/check_gpu.py --next-n 2 > $OUT/gluon_n2.log 2>&1
echo "gluon rc=$?"
timeout 90 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"
tail -n 30 $OUT/gluon_n2.log; tail -n 14 $OUT/eager.log
