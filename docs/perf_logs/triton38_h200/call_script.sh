#!/usr/bin/env bash
# Device call B of Triton 3.8 (call A stashed .t38/p0 in /tmp/tparts): unpack; issue 30's A/B of the
# ragged prefill's shipped configs, head_sum tree against chain, under 3.6 then 3.8; then `retime`
# under 3.8 of PHASE's families into /tmp/r38 (kept while the machine is warm), store copied to $OUT.
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
mkdir -p /tmp/o
if [ ! -d /tmp/triton-3.8.0/triton ]; then
  cp .t38/p1/* /tmp/tparts/ 2>/dev/null; ls -la /tmp/tparts
  mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || { t "unpack failed"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
mkdir -p /tmp/r38 && [ -f /tmp/r38/source.sqlite ] || xz -dc .c38/trials.sqlite.xz > /tmp/r38/source.sqlite
export PYTHONUNBUFFERED=1
P36=/tmp/site:$PWD; P38=/tmp/triton-3.8.0:/tmp/site:$PWD
PYTHONPATH=$P38 python3 -c "import triton; print('triton under P38:', triton.__version__, triton.__file__)"; t ready
R="--family prefill_ragged --buckets 4096x16384:causal,4096x65536:causal,1024x8192:causal --table nvidia_h200 --override head_sum=chain"
ab() {  # ab NAME VERSION SECONDS ARGS
  local P=$P36; [ $2 = 3.6.0 ] || P=$P38
  PYTHONPATH=$P TRITON_CACHE_DIR=/tmp/tc-$2 timeout $3 python3 -m bench.template_ab $4 > $OUT/ab_$1_$2.log 2>&1
  t "$1 $2 rc=$?"; grep -v "^\s*$" $OUT/ab_$1_$2.log | tail -${5:-6}
}
if [ -n "${AB:-}" ]; then
  ab ragged 3.6.0 ${AB_S:-100} "$R"; ab ragged 3.8.0 ${AB_S:-100} "$R"
  ab ragged2 3.6.0 ${AB_S:-100} "$R"; ab ragged2 3.8.0 ${AB_S:-100} "$R"
fi
left=$(( ${LIMIT:-585} - ($(date +%s) - S) ))
PYTHONPATH=$P38 TRITON_CACHE_DIR=/tmp/tc-3.8.0 timeout $left python3 cli.py retime --table nvidia_h200 $RT \
  --source-db /tmp/r38/source.sqlite --db /tmp/r38/trials.sqlite --out /tmp/r38/tables --quiet > $OUT/retime_$PHASE.log 2>&1
t "retime $PHASE rc=$?"; tail -12 $OUT/retime_$PHASE.log
cp /tmp/r38/trials.sqlite $OUT/r38_trials.sqlite 2>/dev/null; tar -czf $OUT/r38_tables.tgz -C /tmp/r38 tables 2>/dev/null
t done
