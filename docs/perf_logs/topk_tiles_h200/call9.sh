# Device call 9: call 8 measured the range merged into the tile maxima kernel as a loss (that
# kernel 10.7 -> 17.9 us at 64 x 128K, the range kernel it saved ~3), so it is reverted there and
# kept in the gather (4.1 -> 4.9 us, a range kernel saved). The 64x128K bucket re-tuned (call 8:
# tiles, TILE 0, BINS 32, 16 programs an SM, 72.1 us against rounds' 85.0), then bench.topk end to
# end with the table. Predicted: the bucket ~67-70 us; decode 64x128K ~1.25 of the logits; the
# other shapes as in call 3 (1.46, 1.55, 1.43; prefill 1.69 and 1.18-1.22); every row exact.
set -x
python3 -m pytest -q -m gpu tests/test_topk_gpu.py -k "tiles or memory or tuned" > $OUT/gpu_tests.log 2>&1
tail -2 $OUT/gpu_tests.log
python3 - <<'PY'
import json
p = "indexer_logits/tables/nvidia_h200/topk.json"
t = json.load(open(p))
t["entries"] = [e for e in t["entries"] if (e["rows"], e["width"]) != (64, 131072)]
json.dump(t, open(p, "w"), indent=1)
PY
python3 cli.py tune-topk --buckets 64x131072 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -5 $OUT/tune_topk.log
cp indexer_logits/tables/nvidia_h200/topk.json $OUT/topk_table.json
python3 -m bench.topk --paths auto --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -9 $OUT/bench_topk.log
