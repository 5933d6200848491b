"""The bound path with and without SEGMENTS, and the table's choice, end to end on the GPU: decode
top-k (CUDA graphs of 4 calls, alternated 5 rounds, best of each) over the logits alone at the
issue's four decode shapes, each variant's answer checked against a stable sort first.

    python3 docs/perf_logs/topk_bound_h200/segments_ab.py > $OUT/segments_ab.log
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch  # noqa: E402

import indexer_logits as K  # noqa: E402
from bench.topk import DECODE, best_alternated, mismatched_rows  # noqa: E402
from tuner.topk_tune import as_served, bucket_inputs  # noqa: E402

K_SEL = 2048
VARIANTS = {"table": None, "bound": {"SEGMENTS": False}, "bound+segments": {"SEGMENTS": True}}


def main() -> int:
    print(f"{'case':<16}{'logits us':>11}" + "".join(f"{v + ' us':>20}{'ratio':>7}" for v in VARIANTS), flush=True)
    for rows, width in DECODE:
        args, logits, lens = bucket_inputs(rows, width, "cuda")
        out = torch.empty(rows, K_SEL, dtype=torch.int32, device="cuda")
        logits_out = torch.empty_like(logits)
        fns = {"logits": lambda: K.fp8_paged_mqa_logits(*args, False, out=logits_out)}
        for name, settings in VARIANTS.items():
            call = lambda: K.fp8_paged_mqa_topk(*args, K_SEL, out=out)  # noqa: E731
            fns[name] = call if settings is None else as_served("bound", settings, call)
            fns[name]()
            bad = mismatched_rows(out, logits, torch.zeros_like(lens), lens, K_SEL)
            if bad:
                print(f"{rows}x{width} {name}: {bad} rows differ from a stable sort", flush=True)
                return 1
        best = best_alternated(fns, 5)
        print(f"{f'{rows}x{width // 1024}K':<16}{best['logits']:>11.1f}"
              + "".join(f"{best[v]:>20.1f}{best[v] / best['logits']:>7.3f}" for v in VARIANTS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
