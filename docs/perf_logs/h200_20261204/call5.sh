# 2026-12-04 call 5 (issue 27): next_n 1 with DeepGEMM's structure (4 consumers, 1 CTA an SM) beside the
# shipped kernel, DeepGEMM and the 1-consumer setting that ran level with v7 (tp16_b3_c1_r64).
# Prediction (before the run): level with the shipped kernel at 8,192-16,384 tiles (0.97-1.03: next_n 1
# is bound by the copy, and its epilogue is half next_n 2's); 5-15% slower at 2,048 tiles (tp16).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log || { tail $OUT/dg_build.log; exit 1; }
. $OUT/dg_env.sh
S=tp16_b3_c1_r64,tp16_b8_c4_r64,tp64_b8_c4_r64,tp128_b8_c4_r64
B=64x8192:full,64x8192:quarter,4x131072:full,16x32768:full,32x32768:full,128x8192:full,16x8192:full,1x131072:full
timeout 300 python3 experiments/gluon_decode/check_gpu.py --next-n 1 --settings $S --buckets $B > $OUT/gluon_n1_c4.log 2>&1
echo "gluon rc=$?"
tail -n 10 $OUT/gluon_n1_c4.log
