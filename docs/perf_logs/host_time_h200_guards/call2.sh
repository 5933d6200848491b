# 2026-12-04 (second session) call 2, issue 26 item 4: launch cost with the GPU idle and busy
# (backlog.py), then bench.eager again beside DeepGEMM 477618c.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 150 python3 docs/perf_logs/host_time_h200_guards/backlog.py > $OUT/backlog.log 2>&1
echo "backlog rc=$?"
wait $BUILD; tail -n 1 $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 200 python3 -m bench.eager --calls 1000 > $OUT/eager.log 2>&1
echo "eager rc=$?"; tail -n 13 $OUT/eager.log | cut -c1-80; cat $OUT/backlog.log
