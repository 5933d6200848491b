#!/usr/bin/env bash
# Round 2 of the served tables under 3.6, 3.8, 3.9 with the committed tables (3.9: prefill from
# triton-3.9/, decode from triton-3.8/ by the per-problem fallback); parts stashed by tree-less calls.
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
[ -d /tmp/triton-3.9.0/triton ] || { cp .t39/pc/* /tmp/tparts9/ && mkdir -p /tmp/triton-3.9.0 && cat /tmp/tparts9/t39part.* | xz -d | tar -x -C /tmp/triton-3.9.0 || t "3.9 unpack failed"; }
[ -d /tmp/triton-3.8.0/triton ] || { mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts8/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || t "3.8 unpack failed"; }
[ -d /tmp/site/optuna ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1; t unpacked; ls indexer_logits/tables/nvidia_h200 | grep triton
TRITON_BACKENDS_IN_TREE=1 PYTHONPATH=/tmp/triton-3.9.0:/tmp/site:$PWD python3 - <<'PY' 2>&1 | grep -v FUSION | grep -v warn_once
import logging, torch; logging.basicConfig(level=logging.WARNING)
from indexer_logits import _dispatch
from indexer_logits._identity import Problem
kw = dict(q_dtype="fp8", cache_dtype="fp8", heads=64, head_dim=128, scale_layout="page_blocked")
for fam, prob in (("decode", Problem(family="decode_paged", page_size=64, **kw)), ("ragged", Problem(family="prefill_ragged", page_size=0, **kw))):
    try:
        s = _dispatch.select(torch.device("cuda"), prob.to_dict(), (64, 8192)); print("3.9 serves", fam, s.rung, s.table, s.variant)
    except Exception as e: print("select", fam, type(e).__name__, e)
PY
PYTHONPATH=/tmp/site:$PWD python3 -m bench.triton_serve --other /tmp/triton-3.8.0 --other /tmp/triton-3.9.0 \
  --rounds 1 --case-s 60 --total-s ${SERVE_S:-200} --out $OUT/serve2
t "serve rc=$?"; tar -czf $OUT/serve2.tgz -C $OUT serve2 && rm -rf $OUT/serve2; t done
