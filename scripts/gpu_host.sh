# Shared by the GPU-host scripts (source it; it runs nothing by itself).

# The carried wheels (.whl: optuna, sqlite-utils and friends, which the device image lacks) into
# /tmp/site, first on PYTHONPATH with the repository root.
# Once per host: a script started by another that installed them already skips it (a second
# install into /tmp/site while a sibling process imports from it could break that process).
install_wheels() {
  [ -n "${WHEELS_INSTALLED:-}" ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD WHEELS_INSTALLED=1
}

# step LOG LIMIT CMD...: run CMD with a time limit, its output in LOG.log; one line with its exit
# status and wall time goes to stdout and to $SUMMARY. A failed step does not stop the script
# (the trial store commits every trial as it is measured).
step() {
  local log=$1 limit=$2; shift 2
  local t0 rc
  t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$log.log" 2>&1
  rc=$?
  echo "== ${log#"$OUT"/}: rc=$rc, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (limit $limit s)" \
    | tee -a "$SUMMARY"
}
