"""bench.topk --profile (a part of that tool, not a tool of its own): where a top-k call's device time goes, kernel by kernel (torch.profiler)."""

from __future__ import annotations


def profile(k: int, paths, on_path) -> None:
    """Per-kernel device time (torch.profiler) of 20 decode top-k calls at 64x32K per path, then of one
    prefill top-k call at 4096x64K. on_path(path, fn): fn with that selection path serving (bench.topk's)."""
    import torch
    import indexer_logits as K
    from tuner.inputs import make_decode_inputs
    from tuner.space import Problem
    inp = make_decode_inputs(Problem(), 64, 32768, lens="full", device="cuda", max_pool_bytes=3 << 30)
    args = (inp.q, inp.kv_cache, inp.weights, inp.context_lens, inp.block_table, None, 32768)
    out = torch.empty(64, k, dtype=torch.int32, device="cuda")
    for p in paths:
        fn = on_path(p, lambda: K.fp8_paged_mqa_topk(*args, k, out=out))
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        print(f"decode 64x32K, path {p}, 20 calls:", flush=True)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8), flush=True)
    from tuner.inputs import make_prefill_inputs
    pre = make_prefill_inputs(Problem(family="prefill_ragged", page_size=0), 4096, 65536, device="cuda")
    out = torch.empty(4096, k, dtype=torch.int32, device="cuda")
    K.fp8_mqa_topk(*pre.args(), k, out=out)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        K.fp8_mqa_topk(*pre.args(), k, out=out)
        torch.cuda.synchronize()
    print("prefill 4096x64K, one call:", flush=True)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8), flush=True)


def kernel_times(fn, calls: int = 10) -> list:
    """[(kernel, launches a call, device us a call)] of `calls` calls of fn, after three warm-up
    calls (torch.profiler): the per-kernel figures the top-k experiment scripts print."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [(e.key, e.count // calls, e.device_time_total / calls) for e in prof.key_averages()
            if e.device_time_total > 0]
