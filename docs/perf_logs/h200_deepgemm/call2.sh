# issue 27: every fp8 decode bucket (next_n 1, 2) and the ragged prefill against DeepGEMM, same process; issue 26: host time beside DeepGEMM's
cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
python3 cli.py emit --gpu nvidia_h200 > $OUT/emit.log 2>&1; git status --short indexer_logits | head -20
python3 -m bench.deepgemm build > $OUT/dg_env.sh 2> $OUT/dg_build.log || { tail $OUT/dg_build.log; exit 1; }
. $OUT/dg_env.sh
RUN=h200-dg-$(date +%Y%m%d-%H%M%S)
B=1,2,4,8,16,32,64,128,256; C=4096,8192,32768,131072,1048576
timeout 200 python3 cli.py bench --dtype fp8 --next-n 1 --batch $B --context $C --lens full --methods shipped,deepgemm --replays 10 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_n1.log 2>&1; echo "n1 rc=$?"
timeout 130 python3 cli.py bench --dtype fp8 --next-n 2 --batch $B --context $C --lens full --methods shipped,deepgemm --replays 10 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_n2.log 2>&1; echo "n2 rc=$?"
timeout 60 python3 cli.py bench --family prefill_ragged --batch 1024,4096 --context 8192,16384,65536 --methods shipped,deepgemm --replays 5 --run-id $RUN --out $OUT/bench_dg.jsonl > $OUT/bench_prefill.log 2>&1; echo "prefill rc=$?"
timeout 90 python3 -m bench.eager --calls 1000 --out $OUT/eager > $OUT/eager.log 2>&1; echo "eager rc=$?"
tail -25 $OUT/eager.log
python3 - $OUT/bench_dg.jsonl <<'PY'
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
r=[x for x in rows if x['method']=='shipped' and x.get('ratio_to_deepgemm')]
print(len(r),'buckets with DeepGEMM; DeepGEMM time / ours:')
for x in r:
    p=json.loads(x['problem_json']); print(x['family'][:7], p.get('next_n',''), f"{x['bucket_batch']}x{x['bucket_context']}", round(1/x['ratio_to_deepgemm'],3), round(x['frac_of_floor']*100,1) if x.get('frac_of_floor') else '')
PY
