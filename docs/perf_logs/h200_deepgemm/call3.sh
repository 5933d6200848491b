# issue 27: why next_n 2 trails DeepGEMM in the bench (10-13% slower than the tuner's timing of the same module)
cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log &
BUILD=$!
timeout 240 python3 -m bench.sweep --next-n 2 --buckets 32x32768:full,64x8192:full --warmup-ms 500 --replays 10 \
  --grid 'block_t=64 tiles_per_program=16,32 num_warps=4,8 num_stages=2,3 orient=k_rows head_sum=tree,chain' \
  --grid 'block_t=64 tiles_per_program=4 num_warps=4 num_stages=3 orient=k_rows programs_per_sm=2,3,4' > $OUT/sweep_n2_hot.log 2>&1
echo "sweep rc=$?"
wait $BUILD; . $OUT/dg_env.sh
timeout 120 python3 -m bench.checks clocks --next-n 2 --deepgemm --buckets 32x32768:full,64x8192:full --warmups 20,100,500,2000 > $OUT/clocks_n2.log 2>&1; echo "clocks n2 rc=$?"
timeout 60 python3 -m bench.checks clocks --next-n 1 --deepgemm --buckets 64x8192:full --warmups 20,100,2000 > $OUT/clocks_n1.log 2>&1; echo "clocks n1 rc=$?"
grep BEST $OUT/sweep_n2_hot.log; grep -c "us " $OUT/sweep_n2_hot.log
cat $OUT/clocks_n2.log $OUT/clocks_n1.log | cut -c1-150
