# 2026-12-04 call 3 (issue 27): the Gluon next_n 2 kernel with DeepGEMM's structure (4 consumers, 1 CTA an SM)
# against the shipped kernel, DeepGEMM and the best 1-consumer setting of call 1, same process.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log || { tail $OUT/dg_build.log; exit 1; }
. $OUT/dg_env.sh
timeout 300 python3 experiments/gluon_decode/check_gpu.py --next-n 2 \
    --settings n2_tp32_b3_c1_r96,n2_tp64_b8_c4_r96,n2_tp128_b8_c4_r96,n2_tp128_b12_c4_r96,n2_tp256_b8_c4_r96 > $OUT/gluon_n2_c4.log 2>&1
echo "gluon rc=$?"
tail -n 12 $OUT/gluon_n2_c4.log
