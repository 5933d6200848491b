# Sourced by the working calls: Triton 3.9 (parts aa, ab stashed in /tmp/tparts9 by tree-less calls,
# ac carried) and 3.8 (aa, ab in /tmp/tparts8) unpacked under /tmp/triton-X; the tuner's wheels; run().
set -u
S=$(date +%s); t() { echo "[$(( $(date +%s) - S )) s] $*"; }
if [ ! -d /tmp/triton-3.9.0/triton ]; then
  cp .t39/pac/* /tmp/tparts9/ && mkdir -p /tmp/triton-3.9.0 && cat /tmp/tparts9/t39part.* | xz -d | tar -x -C /tmp/triton-3.9.0 || t "3.9 unpack failed"
fi
if [ ! -d /tmp/triton-3.8.0/triton ]; then
  mkdir -p /tmp/triton-3.8.0 && cat /tmp/tparts8/t38part.* | xz -d | tar -x -C /tmp/triton-3.8.0 || t "3.8 unpack failed"
fi
[ -d /tmp/site/optuna ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
run() {  # run VERSION SECONDS LOG ARGS...: python3 ARGS under that Triton, output to $OUT/LOG
  local v=$1 s=$2 log=$3; shift 3; local P=/tmp/site:$PWD E=
  [ $v = 3.6.0 ] || { P=/tmp/triton-$v:$P; E=TRITON_BACKENDS_IN_TREE=1; }
  env $E PYTHONPATH=$P TRITON_CACHE_DIR=/tmp/tc-$v timeout $s python3 "$@" > $OUT/$log 2>&1; local rc=$?
  t "$log rc=$rc"; return $rc
}
backup() {  # backup SRC DST: a consistent copy of a SQLite store (its WAL folded in)
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" "$1" "$2"
}
mkdir -p /tmp/rt
