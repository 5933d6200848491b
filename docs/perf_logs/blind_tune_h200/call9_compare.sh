# Call 9's second half (the first: `python3 -m bench.blind_tune tune --out $OUT/b`, 511 s).
# Inputs laid out in the tree as the call had them:
#   bt/b/fresh/trials.sqlite  = call9_trials.sqlite (the fresh tune's store)
#   bt/u/long/trials.sqlite   = call5_untuned_long.sqlite (the 5x search, timed on 2026-12-03)
#   bt/u/untuned.json         = {"problem": [...bf16 next_n 2...], "long_s": 270.0, "long_trials": 60}
#     (so `untuned` runs the fast tune again, under model 8, and keeps the 5x search)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
python3 cli.py emit --db bt/b/fresh/trials.sqlite --out bt/b/tables > $OUT/emit.log 2>&1
python3 -m bench.blind_tune compare bt/b --total-s 55 > $OUT/compare.log 2>&1
python3 -m bench.blind_tune untuned --out bt/u --total-s 40 > $OUT/untuned.log 2>&1
cp bt/u/fast/trials.sqlite $OUT/untuned_fast.sqlite; cp bt/u/untuned.json $OUT/
grep -E "geo-mean|worst" $OUT/compare.log $OUT/untuned.log | tail -12
