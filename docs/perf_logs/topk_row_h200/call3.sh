# 2026-12-04 (second session) call 3, issue 29: the decode cases end to end with PATH "auto" (the
# row path at 128 x 8K with its swept settings: CAP 512, 64 bins, 8,192 keys a step, 16 warps)
# beside the four kernels, every row checked first.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
export PYTHONUNBUFFERED=1
timeout 100 python3 -m bench.topk --paths auto,rounds --skip-prefill --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -n 6 $OUT/bench.log
