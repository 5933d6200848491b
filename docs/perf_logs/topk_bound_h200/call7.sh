# Device call 7 (2026-12-05, tenth session): the resident path (indexer_logits._topk_resident: the four
# kernels' phases in one launch, a row's programs meeting at a barrier in its workspace), its GPU tests
# (the barrier across programs, eagerly and in replayed graphs; every S.PATHS test with "resident"),
# then bench.topk's decode cases, auto (the table as committed) beside resident.
# Predicted (before the run), the H200's logits 72.6 / 272.9 / 38.4 / 38.3 us: the selection alone
# ~12 us at 64x32K (rounds 29.8), ~40 at 64x128K (tiles 73: every SM busy, ~100 instructions a key),
# ~9 at 1x1M (rounds 19.5), ~9 at 128x8K (row 15); end to end 1.17, 1.15, 1.23, 1.23.
set -x
timeout 300 python3 -m pytest -q -x tests/test_topk_gpu.py -k resident > $OUT/gpu_tests.log 2>&1
tail -3 $OUT/gpu_tests.log
timeout 200 python3 -m bench.topk --paths auto,resident --skip-prefill --out $OUT/bench > $OUT/bench.log 2>&1
tail -8 $OUT/bench.log
