cd /work/main
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
timeout 120 python3 cli.py tune --quiet --dtype fp8 --next-n 1 --batch 1,2,4,256 --context 32K --seeds-only --seed-table bt/seed_long_tuned.json --trials 1 > $OUT/logs/long_n1.log 2>&1; echo "n1 rc=$?"
timeout 150 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 1,64,256 --context 32K,1M --seeds-only --seed-table bt/seed_long_tuned.json --trials 1 > $OUT/logs/long_n2.log 2>&1; echo "n2 rc=$?"
timeout 90 python3 cli.py tune --quiet --dtype fp8 --next-n 2 --batch 4 --context 1M --seeds-only --seed-table bt/seed_long_pred.json --trials 1 > $OUT/logs/long_n2_pred.log 2>&1; echo "n2 pred rc=$?"
cp db/trials.sqlite $OUT/trials.sqlite
grep -hE "^fp8_pg" $OUT/logs/*.log | grep -v " - "
