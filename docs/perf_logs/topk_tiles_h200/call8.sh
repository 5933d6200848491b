# Device call 8: the tiles path less its two range kernels (the tile maxima kernel and the gather
# merge the ranges into the rows' state as they read the scores) and with tau kept by the pick's
# count kernel (each pick program read the k selected maxima again: 8 KB). Call 6's profile of 64 x
# 128K by tiles of 8: 77.4 us, of which the two range kernels 5.8 and the pick 8.7.
# Predicted: the selection ~6-9 us less at every shape; decode 64x128K tiles ~1.26-1.27 (rounds
# 1.29); prefill 2048x1M ~1.17; 4096x64K tiles ~1.70 (rounds 1.71). Then the tuner at 64x128K
# with tiles in its space (from 128K keys now): tiles kept if 2% under rounds' 81 us.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tiles or memory" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
python3 docs/perf_logs/topk_tiles_h200/profile_block.py > $OUT/profile.log 2>&1
grep -A1 "us a call" $OUT/profile.log | grep -v "^--"
python3 docs/perf_logs/topk_tiles_h200/tiles_ab.py --tiles 0 --out $OUT/tiles_ab.json > $OUT/tiles_ab.log 2>&1
tail -8 $OUT/tiles_ab.log
python3 - <<'PY'
import json
p = "indexer_logits/tables/nvidia_h200/topk.json"
t = json.load(open(p))
t["entries"] = [e for e in t["entries"] if (e["rows"], e["width"]) != (64, 131072)]
json.dump(t, open(p, "w"), indent=1)
PY
python3 cli.py tune-topk --buckets 64x131072 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -6 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
