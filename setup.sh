#!/usr/bin/env bash
# Set up .venv for this checkout. On a machine without an NVIDIA GPU it installs the CPU build
# of torch (seconds, not a multi-GB CUDA download); with a GPU it keeps pip's default CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q -e '.[test,plots]'
else
  .venv/bin/python -m pip install -q 'torch==2.13.0' -e '.[test,plots]'
fi
.venv/bin/python cli.py info
