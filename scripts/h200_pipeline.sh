#!/usr/bin/env bash
# The whole product loop on the H200, in one device call: GPU tests, tune (fp8 decode, bf16
# decode, fp8 prefill, fp8 chunked prefill), emit, verify, bench, the chunked-prefill
# measurement; then pack what the repository keeps (the trial store, the H200 table, bench
# results) into $OUT/results.tgz.
# Each step has a time limit and its full log goes to $OUT/<step>.log; a failed step does not
# stop the next one (the trial store commits every trial as it is measured).
# Usage (device tool): bash scripts/h200_pipeline.sh   [with .whl carried]
set -u
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/gpu_host.sh"
install_wheels || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$SUMMARY"
step "$OUT/gpu_tests" 60 python3 -m pytest -q -m gpu tests/
step "$OUT/tune_fp8" ${TUNE_FP8_S:-170} python3 cli.py tune --dtype fp8 --next-n 1,2 --batch pow2 --context 4K,8K,32K,128K,1M \
  --trials ${TRIALS:-4} --time-budget $(( ${TUNE_FP8_S:-170} - 15 )) --quiet
step "$OUT/tune_bf16" 45 python3 cli.py tune --dtype bf16 --batch 1,64,256 --context 32K,128K --trials 3 --time-budget 35 --quiet
step "$OUT/tune_prefill" 50 python3 cli.py tune --family prefill_ragged --batch 4096 --context 16K,64K --trials 3 --time-budget 40 --quiet
step "$OUT/tune_prefill_paged" 50 python3 cli.py tune --family prefill_paged --dtype fp8 --batch 4096 --context 22528,131072 \
  --trials 3 --time-budget 40 --quiet
step "$OUT/emit" 30 python3 cli.py emit --gpu nvidia_h200
step "$OUT/verify" 50 python3 cli.py verify --gpu nvidia_h200 --no-defaults
step "$OUT/bench" 120 bash -c 'python3 cli.py bench --dtype fp8 --batch 1,64,256 --context 8192,131072 --candidates 4 --replays 20 \
  && python3 cli.py bench --dtype bf16 --batch 64 --context 32768,131072 --lens full --candidates 3 --replays 20 \
     --methods shipped,default,autotune,reference \
  && python3 cli.py bench --family prefill_ragged --batch 4096 --context 16384,65536 --candidates 3 --replays 5 \
     --methods shipped,default,autotune,reference \
  && python3 cli.py bench --family prefill_paged --dtype fp8 --batch 4096 --context 22528,131072 --candidates 3 \
     --replays 5 --methods shipped,default,autotune,reference'
if [ -f scripts/gpu_chunked_prefill.py ]; then step chunked_prefill 60 python3 scripts/gpu_chunked_prefill.py --no-alternatives --replays 5; fi
tar czf "$OUT/results.tgz" db/trials.sqlite indexer_logits/tables/nvidia_h200 docs/results 2>> "$SUMMARY"
for f in gpu_tests tune_fp8 tune_bf16 tune_prefill tune_prefill_paged emit verify bench chunked_prefill; do
  [ -f "$OUT/$f.log" ] && { echo "---- $f (tail)"; tail -n 14 "$OUT/$f.log"; }
done
cat "$SUMMARY"
