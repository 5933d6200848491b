# Device call 12 (2026-12-05, eleventh session), after call 11 on the same machine: the top-k GPU tests
# with the re-tuned table in place (the resident ones at their defaults, the refactored helper of
# test_topk_gpu never yet run on a GPU), then bound against rounds, the selection alone (bound paying
# its own maxima pass, as in a prefill block) over 1-256 rows of 32K-512K keys: where the built-in
# choice (pick_path, what a GPU with no table serves) should pick bound.
# Predicted (before the run): every test passes; bound ahead of rounds from 16 rows at 128K-512K keys
# and from 64 rows at 32K (10-30%), level or behind at 1-4 rows (the maxima pass and round 1 over them
# cost what the fewer keys counted save).
set -x
timeout 300 python3 -m pytest -q tests/test_topk_gpu.py tests/test_bench_eager_topk.py > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log
timeout 240 python3 -m bench.topk --paths bound,rounds --skip-prefill --crossover --crossover-rows 1,4,16,64,256 \
  --crossover-widths 32768,131072,524288 --out $OUT/bench > $OUT/crossover.log 2>&1
tail -22 $OUT/crossover.log
