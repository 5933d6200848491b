# 2026-12-04 call 2 (issue 26): verify --record of the H200 table (every entry at its own bucket, a 5 GiB pool),
# beside it the correctness GPU tests and the peer suites at the peers' own shapes (the tools' smoke tests,
# tests/test_bench_*, left out: call 1 found them too slow for a call).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
( timeout 480 python3 cli.py verify --gpu nvidia_h200 --no-defaults --record > $OUT/verify.log 2>&1; echo "verify rc=$?" >> $OUT/verify.log ) &
V=$!
T=$(ls tests/test_*.py | grep -v -e test_bench_ -e test_peer_suites)
timeout 300 python3 -m pytest -q -m gpu $T -p no:cacheprovider -rfEX --durations=8 > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
timeout 200 python3 -m pytest -q -m gpu tests/test_peer_suites.py -p no:cacheprovider -rfEX --durations=5 > $OUT/peer_suites.log 2>&1; echo "peer rc=$?"
wait $V; tail -n 4 $OUT/verify.log
cp indexer_logits/tables/nvidia_h200/dispatch.json $OUT/dispatch.json; git status --short > $OUT/status.txt
tail -n 3 $OUT/gpu_tests.log $OUT/peer_suites.log
