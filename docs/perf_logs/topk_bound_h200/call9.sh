# Device call 9 (2026-12-05, tenth session): what call 8 was to time, folded into the re-tune (devices
# scarce: call 8 never ran). The resident path's GPU tests; then tune-topk --fresh over the issue's
# decode shapes (not the prefill block: device time) with the bound and resident paths in the space (resident: steps
# of 2,048-8,192 keys at 8-16 warps, a chunk of one step held in registers, PDL on and off: its trials,
# timed as the decode call less the logits alone, are call 8's A/B); then bench.topk with the table.
# Since call 7 also: a cooperative launch (all programs resident, or a launch error), PDL off by default.
# Predicted (before the run): resident, held, wins 1x1M and 128x8K (~10 us of selection against rounds'
# ~20 and row's ~15); at 64x32K and 64x128K (chunks of 2 and 8 steps of 8,192) bound keeps them unless
# PDL off turns out to be call 7's loss.
set -x
timeout 60 python3 -m pytest -q -x tests/test_topk_gpu.py -k resident > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 220 python3 cli.py tune-topk --fresh \
  --buckets 1x1048576,128x8192,64x32768,64x131072 --trials $OUT/topk_trials.jsonl > $OUT/tune_topk.log 2>&1
tail -8 $OUT/tune_topk.log
python3 - <<'PY'
import json, os
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/topk_trials.jsonl")]
for r in rows:
    if r["path"] == "resident" or r.get("error"):
        print(f'{r["rows"]}x{r["width"]} {r["path"]} {r["settings"]} {r.get("us", r.get("error", "inexact"))}')
PY
find indexer_logits/tables -name topk.json -newer docs/perf_logs/topk_bound_h200/call9.sh -exec cp {} $OUT/topk_table.json \;
timeout 70 python3 -m bench.topk --paths auto --skip-prefill --out $OUT/bench > $OUT/bench_topk.log 2>&1
tail -6 $OUT/bench_topk.log
