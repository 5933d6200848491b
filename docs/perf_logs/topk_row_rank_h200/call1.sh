# 2026-12-04 (second session), issue 29: the row path ranks its candidates pairwise instead of
# tl.sort and launches as a PDL dependent of the logits kernel. GPU tests, then end to end
# (auto, row forced, rounds), then the row path's sweep (ranking vs sort, PDL, block, warps), then
# the crossover against rounds.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pytest -q -m gpu tests/test_topk_gpu.py -p no:cacheprovider -rfEX > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -n 2 $OUT/gpu_tests.log
timeout 120 python3 -m bench.topk --paths auto,row,rounds --skip-prefill --out $OUT/e2e > $OUT/e2e.log 2>&1
echo "e2e rc=$?"
timeout 200 python3 -m bench.topk --paths row --sweep --skip-prefill --out $OUT/sweep > $OUT/sweep.log 2>&1
echo "sweep rc=$?"
timeout 120 python3 -m bench.topk --paths row,rounds --crossover --skip-prefill --out $OUT/cross > $OUT/cross.log 2>&1
echo "crossover rc=$?"
tail -n 8 $OUT/e2e.log
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/sweep/topk.json"))
for case in d.get("decode", d if isinstance(d, list) else []):
    sw = case.get("sweep", [])
    print(case.get("case", case.get("rows")), [(s.get("BLOCK"), s.get("NUM_WARPS"), s.get("PDL"), s.get("RANK_STEP"), round(s.get("us", -1), 1), s.get("exact")) for s in sw[:4]])
PY
tail -n 18 $OUT/cross.log
