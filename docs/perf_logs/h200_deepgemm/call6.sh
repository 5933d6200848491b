# issue 27 / 25: the 32K-1M buckets where the fresh tune (or the blind table) chose faster configs, timed into db; then against DeepGEMM
cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 120 python3 cli.py tune --quiet --dtype fp8 --next-n 1 --batch 1,2,4,256 --context 32K --seeds-only --seed-table bt/seed_long_tuned.json --trials 1 > $OUT/long_n1.log 2>&1; echo "n1 rc=$?"
timeout 150 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 1,64,256 --context 32K,1M --seeds-only --seed-table bt/seed_long_tuned.json --trials 1 > $OUT/long_n2.log 2>&1; echo "n2 rc=$?"
timeout 90 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 4 --context 1M --seeds-only --seed-table bt/seed_long_pred.json --trials 1 > $OUT/long_n2_pred.log 2>&1; echo "n2 pred rc=$?"
cp db/trials.sqlite $OUT/trials.sqlite
python3 cli.py emit --gpu nvidia_h200 > $OUT/emit.log 2>&1; echo "emit rc=$?"
wait $BUILD; . $OUT/dg_env.sh
RUN=h200-dg-$(date +%Y%m%d-%H%M%S)
timeout 60 python3 cli.py bench --dtype fp8 --next-n 1 --batch 1,2,4,256 --context 32768 --lens full --methods shipped,deepgemm --replays 10 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_n1.log 2>&1; echo "bench n1 rc=$?"
timeout 60 python3 cli.py bench --dtype fp8 --next-n 2 --batch 1,256 --context 32768 --lens full --methods shipped,deepgemm --replays 10 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_n2a.log 2>&1; echo "bench n2a rc=$?"
timeout 60 python3 cli.py bench --dtype fp8 --next-n 2 --batch 4,64 --context 1048576 --lens full --methods shipped,deepgemm --replays 10 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_n2b.log 2>&1; echo "bench n2b rc=$?"
grep -hE "^fp8_pg" $OUT/long_n1.log $OUT/long_n2.log $OUT/long_n2_pred.log | grep -v " - "
grep -hE "shipped|deepgemm" $OUT/bench_n1.log $OUT/bench_n2a.log $OUT/bench_n2b.log | sort -u
