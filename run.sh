#!/usr/bin/env bash
# The main job. Sets up .venv, then:
# - on a host with an NVIDIA GPU: tune what an engine calls (fp8 decode next_n 1 and 2, prefill
#   over ragged K, chunked prefill: `tune --engine`, guided by the performance model, within about
#   ten minutes; progress with an ETA), emit the frozen modules and dispatch table, verify them,
#   benchmark them against the baselines, write the report;
# - without a GPU: cross-compile a sample of the search space for sm_120 (RTX PRO 6000
#   Blackwell) and sm_90, predict the RTX PRO 6000's and the H100's tables (the performance model over
#   the target's space, cross-compiled; nothing to do when the committed table came from the same model,
#   templates and Triton, and with db/xcompile_cache.jsonl a few minutes of pre-rank otherwise), then run the whole tuning loop (ask, render, gate, time, store)
#   on tiny shapes under Triton's CPU interpreter, emit it into db/scratch/ and verify it there.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
PY=.venv/bin/python
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  $PY cli.py tune --engine --trials 12 --time-budget 480
  $PY cli.py emit
  $PY cli.py verify
  $PY cli.py bench
  $PY cli.py report
else
  $PY cli.py check --target sm_120 --target sm_90 --sample 8
  $PY cli.py predict --gpu rtx_pro_6000 --if-stale
  $PY cli.py predict --gpu h100_sxm --if-stale
  scratch=db/scratch
  $PY cli.py tune --interpret --heads 16 --head-dim 32 --page-size 32 --batch 2 --context 128,256 \
    --trials 3 --ask-batch 3 --db "$scratch/cpu_trials.sqlite" --quiet
  $PY cli.py emit --db "$scratch/cpu_trials.sqlite" --gpu cpu --out "$scratch/kernels"
  $PY cli.py verify --root "$scratch/kernels" --gpu cpu --no-defaults
fi
