cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log; . $OUT/dg_env.sh
timeout 120 python3 -m bench.checks clocks --next-n 2 --deepgemm --buckets 32x32768:full,64x8192:full --warmups 20,100,500,2000 > $OUT/clocks_n2.log 2>&1; echo "clocks n2 rc=$?"
timeout 60 python3 -m bench.checks clocks --next-n 1 --deepgemm --buckets 64x8192:full --warmups 20,100,2000 > $OUT/clocks_n1.log 2>&1; echo "clocks n1 rc=$?"
cat $OUT/clocks_n2.log $OUT/clocks_n1.log | cut -c1-160
