"""Where the decode bar's four cases spend their device time, kernel by kernel (torch.profiler, the selection's
own kernels without PDL so that none includes a wait for the one before): the logits call alone, then the top-k
call as served (the GPU's table, the logits kernel's epilogue where the path reads it), each kernel's us a call.

    python3 docs/perf_logs/topk_arena/decode_parts.py [--out FILE]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import indexer_logits as K  # noqa: E402
from bench._topk_profile import kernel_times  # noqa: E402
from indexer_logits import _topk_select as S  # noqa: E402
from tuner.inputs import make_decode_inputs  # noqa: E402
from tuner.space import Problem  # noqa: E402

CASES = ((64, 32768), (64, 131072), (1, 1 << 20), (128, 8192))
K_ = 2048


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    S.PDL = False  # (the row path's own PDL setting is off by default)
    result = {"device": torch.cuda.get_device_name(), "cases": {}}
    print(result["device"], flush=True)
    for rows, width in CASES:
        inp = make_decode_inputs(Problem(), rows, width, lens="full", device="cuda", max_pool_bytes=3 << 30)
        args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, width)
        logits_out = torch.empty(rows, width, device="cuda")
        idx = torch.empty(rows, K_, dtype=torch.int32, device="cuda")
        name = f"{rows}x{width // 1024}K"
        alone = kernel_times(lambda: K.fp8_paged_mqa_logits(*args, out=logits_out), 20)
        topk = kernel_times(lambda: K.fp8_paged_mqa_topk(*args, K_, out=idx), 20)
        path = S._serving(rows, width, torch.device("cuda"), "decode")
        result["cases"][name] = {"path": path[0], "settings": path[1], "logits_alone": alone, "topk": topk}
        print(f"\n{name}: path {path[0]} {path[1]}")
        for label, parts in (("logits alone", alone), ("top-k call", topk)):
            total = sum(us for _, _, us in parts)
            print(f"  {label}: {total:.1f} us a call")
            for kern, n, us in sorted(parts, key=lambda p: -p[2]):
                print(f"    {us:8.2f} us  x{n}  {kern[:90]}")
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
