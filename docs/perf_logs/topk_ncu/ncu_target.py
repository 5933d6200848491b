"""The program Nsight Compute profiles (call1.sh): one top-k call a case, as served (the GPU's tables, the
logits kernel's epilogue where the path reads it), between cudaProfilerStart and Stop, after warm-up calls
that compile every kernel; so `ncu --profile-from-start off` sees exactly one call's kernels a case.

    ncu --profile-from-start off ... python3 docs/perf_logs/topk_ncu/ncu_target.py [CASE ...]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from indexer_logits import _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

CASES = {"64x32K": (64, 32768), "1x1M": (1, 1 << 20), "128x8K": (128, 8192), "64x128K": (64, 131072)}
K_ = 2048


def main() -> int:
    names = sys.argv[1:] or list(CASES)
    for name in names:
        rows, width = CASES[name]
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=1 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        for _ in range(3):
            K.fp8_paged_mqa_topk(*args, K_, out=idx)
        torch.cuda.synchronize()
        print(name, "path", S._serving(rows, width, torch.device("cuda"), "decode"), flush=True)
        torch.cuda.cudart().cudaProfilerStart()
        K.fp8_paged_mqa_topk(*args, K_, out=idx)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
