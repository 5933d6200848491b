# issue 25: the 32K-1M compare; issue 27: the small fp8 buckets timed with the fresh tune's configs; DeepGEMM build probe
cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 260 python3 -m bench.blind_tune compare bt/b --contexts 32768,131072,1048576 --total-s 200 > $OUT/compare_long.log 2>&1
echo "compare rc=$?"
timeout 120 python3 cli.py tune --quiet --dtype fp8 --next-n 1 --batch 1,2,4,8,16,32 --context 4K,8K --seeds-only --seed-table bt/seed_small.json --trials 1 > $OUT/small_n1.log 2>&1
echo "tune n1 rc=$?"
timeout 60 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 1,4,8 --context 4K,8K --seeds-only --seed-table bt/seed_small.json --trials 1 > $OUT/small_n2.log 2>&1
echo "tune n2 rc=$?"
cp db/trials.sqlite $OUT/trials.sqlite
wait $BUILD; tail -3 $OUT/dg_build.log; cat $OUT/dg_env.sh
( . $OUT/dg_env.sh; timeout 90 python3 cli.py bench --dtype fp8 --batch 1,64 --context 8192 --lens full --methods shipped,deepgemm --replays 10 --out $OUT/dg_probe.jsonl > $OUT/dg_probe.log 2>&1 )
echo "dg probe rc=$?"; tail -8 $OUT/dg_probe.log
grep -E "geo-mean|worst|all" $OUT/compare_long.log | tail -6
tail -4 $OUT/small_n1.log $OUT/small_n2.log
