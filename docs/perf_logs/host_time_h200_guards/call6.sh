# 2026-12-04 (second session) call 6: the tools' own GPU tests (tests/test_bench_*), which no call had
# run whole for three sessions, but blind_tune's 15-minute `untuned` one; no DeepGEMM build (its rows
# then say why it is absent, which the tests check).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
timeout 330 python3 -m pytest -v -m gpu tests/test_bench_*.py -k "not untuned" -p no:cacheprovider -rfEX --durations=0 > $OUT/tools_gpu_tests.log 2>&1
echo "tools gpu tests rc=$?"; grep -E "PASSED|FAILED|ERROR|SKIPPED" $OUT/tools_gpu_tests.log | cut -c1-150 | tail -20; tail -n 2 $OUT/tools_gpu_tests.log
