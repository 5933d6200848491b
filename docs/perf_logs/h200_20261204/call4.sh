# 2026-12-04 call 4 (issue 27): the 4-consumer Gluon next_n 2 at each bucket's one-wave size (1 CTA an SM),
# 2 and 3 slots a consumer, over eight buckets, beside the shipped kernel and DeepGEMM, same process.
# Prediction (before the run): 3 slots within 2% of 2; 8x8K at tp8 6-8 us (shipped 6.2: a fixed cost
# of the specialised setup); 64x32K and 256x8K at tp256 0.93-0.96 of the shipped kernel, as 16x128K.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log || { tail $OUT/dg_build.log; exit 1; }
. $OUT/dg_env.sh
S=n2_tp8_b8_c4_r96,n2_tp64_b8_c4_r96,n2_tp64_b12_c4_r96,n2_tp128_b8_c4_r96,n2_tp128_b12_c4_r96,n2_tp256_b8_c4_r96,n2_tp256_b12_c4_r96
B=8x8192:full,64x8192:full,4x131072:full,32x32768:full,128x8192:full,1x1048576:full,64x32768:full,16x131072:full,256x8192:full
timeout 400 python3 experiments/gluon_decode/check_gpu.py --next-n 2 --settings $S --buckets $B > $OUT/gluon_n2_c4_sweep.log 2>&1
echo "gluon rc=$?"
tail -n 12 $OUT/gluon_n2_c4_sweep.log
