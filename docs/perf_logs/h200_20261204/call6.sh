# 2026-12-04 call 6: three fp8 next_n 2 buckets whose fastest stored trial (tp32) was timed under an
# older template, emit serving the best current-template trial instead; the old winners timed under the
# current template (seeds only), so emit can take them if they still win. Stored p50s: 256x32K tp32
# 327 us (old template) against the served tp12's 346; 256x8K and 4x1M within 1%.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
timeout 150 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 4,256 --context 8192,32768,1048576 --seeds-only \
    --seed-table docs/perf_logs/h200_20261204/call6_seed_stale.json --trials 1 > $OUT/call6_tune.log 2>&1
echo "tune rc=$?"
python3 -c "import sqlite3; c = sqlite3.connect('db/trials.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()"
cp db/trials.sqlite $OUT/trials.sqlite
tail -n 8 $OUT/call6_tune.log
