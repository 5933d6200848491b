"""Measurement tools beside the product (`cli.py tune / bench / report`): the lab notebook's
instruments (docs/PERF.md). Run each from the repository root as `python -m bench.<tool>`
(`--help` for its options); none edits the import path, none is tied to one GPU model.

  ceilings         what bounds decode on this GPU: empty, chain, stream and paged-read ceilings
                   beside the shipped kernel (GPU)
  sweep            gate and time a list or grid of configs over a few buckets (GPU; --cpu-smoke)
  template_ab      A/B a candidate template (experiments/<name>) on the shipped configs: timed on
                   the GPU, gated under the interpreter (--cpu-smoke), or cross-compiled for its
                   registers and programs per SM (--xcompile)
  xcompile_ir      what the compiler made of a decode config's tile loop (no GPU)
  timeline         a decode launch's programs from timers read inside them (GPU; --xcompile: no GPU)
  pdl              programmatic dependent launch variants with a q-writing predecessor (GPU)
  chunked_prefill  chunked prefill's time and peak memory, default and alternatives (GPU; --cpu-smoke)
  checks           is a timing trustworthy: warmup, bench-paths, clocks, page-stride, matmul-rate (GPU)
  runs             read bench runs' stored rows: goals, compare, fixed-cost (no GPU)
  table_configs    a committed table's distinct configs, the seeds of a re-tune (no GPU)
  workers          one tuning worker against N on the same table: wall times
  host             the driver for a GPU host: lanes of steps (tune, emit, verify, bench, any tool)
                   on N GPUs in one call, with time limits, logs and one results archive
"""
