"""`predict`: a table for a GPU nobody here has, from the performance model and cross-compiles."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from tuner.devices import DEVICES, device as make_device
from tuner.buckets import parse_sizes
from tuner.predict import CompileCache, default_buckets, predict
from tuner.model import MODEL_VERSION
from tuner.predicted_table import DEFAULT_SCOPE, emit_predicted, predicted_dir, same_inputs
from tuner.tables import DEFAULT_HEAD_DIM, DEFAULT_HEADS, DEFAULT_PAGE, default_problems

from .common import DB_DIR, GENERATED, FamilyChoice


@click.command("predict")
@click.option("--gpu", "gpu", required=True, type=click.Choice(sorted(DEVICES)),
              help="The built-in device whose properties the model takes (tuner/devices.py).")
@click.option("--sm", type=click.IntRange(min=1), default=None, help="Override: SM count.")
@click.option("--bandwidth", type=click.FloatRange(min=1), default=None, metavar="GB/S",
              help="Override: device-to-device copy bandwidth in GB/s (the decode floor's rate).")
@click.option("--fp8-tflops", type=click.FloatRange(min=1), default=None, help="Override: fp8 matmul rate.")
@click.option("--bf16-tflops", type=click.FloatRange(min=1), default=None, help="Override: bf16 matmul rate.")
@click.option("--l2-mb", type=click.FloatRange(min=1), default=None, help="Override: L2 size in MB.")
@click.option("--launch-us", type=click.FloatRange(min=0), default=None, help="Override: launch-to-launch time.")
@click.option("--start-us", type=click.FloatRange(min=0), default=None, help="Override: a program's dependent start.")
@click.option("--latency-us", type=click.FloatRange(min=0), default=None, help="Override: a cache read's round trip.")
@click.option("--family", "families", multiple=True, type=FamilyChoice(),
              help="Only this family's default problems (repeatable). [default: all]")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(["fp8", "bf16"]),
              help="Only this dtype's problems (repeatable). [default: both]")
@click.option("--next-n", "next_ns", multiple=True, type=int, help="Decode: only these next_n (repeatable).")
@click.option("--lens-mode", "lens_modes", multiple=True, type=click.Choice(["1d", "2d"]),
              help="Decode: only these lens modes (repeatable).")
@click.option("--heads", default=DEFAULT_HEADS, show_default=True, type=click.IntRange(min=1),
              help="Query heads of the problems predicted (DeepSeek-V3.2's indexer: 64; other head counts get the "
                   "family defaults).")
@click.option("--head-dim", default=DEFAULT_HEAD_DIM, show_default=True, type=click.IntRange(min=1),
              help="Head dim of the problems predicted.")
@click.option("--batch", "batches", default=None, metavar="SIZES",
              help="Only these batches (decode requests; prefill query rows), e.g. 1,8,64. [default: the grid's]")
@click.option("--context", "contexts", default=None, metavar="SIZES",
              help="Only these contexts (K/M suffixes allowed). [default: the grid's]")
@click.option("--top", default=3, show_default=True, type=click.IntRange(min=1),
              help="Points cross-compiled per bucket and round of the pre-rank.")
@click.option("--jobs", default=None, type=click.IntRange(min=1), help="Compile processes. [default: CPU count]")
@click.option("--cache", "cache_path", default=DB_DIR / "xcompile_cache.jsonl", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="Cross-compile results kept between runs.")
@click.option("--if-stale", is_flag=True,
              help="Do nothing when OUT's predicted table for the GPU came from the same device properties, model, "
                   "templates, Triton and tool version (run.sh's CPU branch: the committed table stands).")
@click.option("--out", "out_dir", default=GENERATED, show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where <gpu_slug>/predicted/ goes.")
def predict_command(gpu, sm, bandwidth, fp8_tflops, bf16_tflops, l2_mb, launch_us, start_us, latency_us, families,
                    dtypes, next_ns, lens_modes, heads, head_dim, batches, contexts, top, jobs, cache_path, if_stale,
                    out_dir) -> None:
    """Predict a dispatch table for a GPU nobody has tuned on, without a GPU.

    For every default problem and bucket of the tuning grid, the feasible space of the GPU's target
    is ranked by the performance model (tuner/model.py), the best few points are cross-compiled for
    the target and the best that fits its limits is chosen. Writes OUT/<gpu_slug>/predicted/
    (provenance kind "predicted"); the runtime serves it when the GPU has no tuned table. On that
    GPU, `cli.py tune --seed-table OUT/<gpu_slug>/predicted/dispatch.json` turns it into a tuned one.
    """
    dev = make_device(gpu, sm=sm, bandwidth=bandwidth, fp8_tflops=fp8_tflops, bf16_tflops=bf16_tflops, l2_mb=l2_mb,
                      launch_us=launch_us, start_us=start_us, latency_us=latency_us)
    default_heads = (heads, head_dim) == (DEFAULT_HEADS, DEFAULT_HEAD_DIM)
    if if_stale and default_heads and not (families or dtypes or next_ns or lens_modes or batches or contexts):
        current = predicted_dir(out_dir, dev.slugs[0]) / "dispatch.json"
        if current.is_file() and same_inputs(json.loads(current.read_text()).get("provenance", {}), dev):
            click.echo(f"{current}: up to date (same device, model {MODEL_VERSION}, templates and Triton)")
            return
    # SGLang's and vLLM's 64-token pages (and ragged K): other page sizes get the family defaults
    problems = [p for p in default_problems()
                if p.heads == heads and p.head_dim == head_dim and p.page_size in (0, DEFAULT_PAGE)
                and (not families or p.family in families) and (not dtypes or p.cache_dtype in dtypes)
                and (not next_ns or not p.kind.decode or p.next_n in next_ns)
                and (not lens_modes or not p.kind.decode or p.lens_mode in lens_modes)]
    if not problems:
        raise click.BadParameter("no default problem matches the filters", param_hint="--family/--dtype/--next-n")
    try:
        only_b = set(parse_sizes(batches, "batch")) if batches else None
        only_c = set(parse_sizes(contexts, "context")) if contexts else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--batch/--context") from None

    def buckets(problem):
        return [b for b in default_buckets(problem)
                if (only_b is None or b.batch in only_b) and (only_c is None or b.context in only_c)]

    click.echo(f"predicting for {dev.gpu_names[0]} ({dev.target}, {dev.sm_count} SMs, "
               f"{dev.copy_bandwidth / 1e9:.0f} GB/s): {len(problems)} problems", err=True)
    start = time.perf_counter()
    prediction = predict(dev, problems, CompileCache(cache_path), jobs=jobs, buckets=buckets, top=top,
                         on_line=lambda s: click.echo(s, err=True))
    filters = {"--family": families, "--dtype": dtypes, "--next-n": next_ns, "--lens-mode": lens_modes,
               "--batch": batches and [batches], "--context": contexts and [contexts]}
    scope = " ".join(f"{k} {','.join(map(str, v))}" for k, v in filters.items() if v) or DEFAULT_SCOPE
    for r in emit_predicted(prediction, dev, out_dir, scope):
        state = f"{len(r.written)} file(s) written, {len(r.removed)} removed" if r.changed else "unchanged"
        click.echo(f"{r.directory}: {r.entries} entries, {r.modules} modules ({state})")
    for note in prediction.notes:
        click.echo(f"  note: {note}")
    click.echo(f"{prediction.compiled} cross-compiled, {prediction.cached} from the cache, "
               f"{time.perf_counter() - start:.0f} s")
