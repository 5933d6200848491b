"""A predicted table on disk: `<out>/<gpu_slug>/predicted/`, the frozen modules of the chosen
configs and a dispatch.json whose provenance says kind "predicted", the device properties and
model version it came from, and the Triton it was cross-compiled with. The same emit machinery
as a tuned table (tuner.tables): the same module files, deterministic bytes, write-if-different,
stale modules removed. The runtime serves it after a tuned table of the slug and before the
family defaults (indexer_logits._dispatch); the board's other names (a second edition) get a
`same_as` pointer file in their own `<slug>/predicted/` instead of a copy.
"""

from __future__ import annotations

import json
from pathlib import Path

from indexer_logits import _dispatch, _tables
from indexer_logits._identity import variant_name

from . import __version__
from .devices import Device
from .families import names as family_names
from .model import MODEL_VERSION, Resources, decode_breakdown
from .predict import Prediction
from .render import template_hash, write_if_different
from .tables import FORMAT, EmitResult, _module_info, _render_into, _write_dir

PREDICTED_DIR = _tables.PREDICTED_DIR
SAME_AS_FILE = _tables.SAME_AS_FILE


def predicted_dir(out_root: Path, slug: str) -> Path:
    return Path(out_root) / slug / PREDICTED_DIR


def _entry(choice, variant: str, device: Device) -> dict:
    p, b, r = choice.problem, choice.bucket, choice.result
    entry = {"problem_key": p.key, "problem": p.to_dict(), "bucket": {"batch": b.batch, "context": b.context},
             "variant": variant, "predicted_score_us": round(choice.predicted_us, 3),
             "registers": r.registers, "spills": r.spills, "shared_bytes": r.shared_bytes, "mma": r.mma}
    if p.kind.decode:
        full = decode_breakdown(device, p, choice.config, Resources(r.registers, r.shared_bytes, r.mma), b.batch,
                                b.context)
        entry.update(predicted_full_us=round(full.total_us, 3), predicted_waves=full.waves,
                     predicted_programs_per_sm=full.resident)
    return entry


DEFAULT_SCOPE = "the default grid"


def build_predicted_table(prediction: Prediction, device: Device, directory: Path, result: EmitResult,
                          scope: str = DEFAULT_SCOPE) -> tuple[dict, set]:
    import triton

    modules: dict[str, dict] = {}
    entries = []
    for choice in prediction.choices:
        variant = variant_name(choice.problem, choice.config)
        if variant not in modules:
            modules[variant] = _module_info(choice.problem, choice.config,
                                            _render_into(choice.problem, choice.config, directory, result))
        entries.append(_entry(choice, variant, device))
    entries.sort(key=lambda e: (e["problem"]["family"], json.dumps(e["problem"], sort_keys=True),
                                e["bucket"]["batch"], e["bucket"]["context"]))
    cc = device.target_limits.capability
    provenance = {
        "kind": "predicted",
        "gpu_slug": device.slugs[0],
        "gpu_slugs": list(device.slugs),
        "gpu_name": device.gpu_names[0],
        "gpu_names": list(device.gpu_names),
        "compute_capability": f"{cc // 10}.{cc % 10}",
        "sm_count": device.sm_count,
        "device": device.to_dict(),
        "model_version": MODEL_VERSION,
        "triton_version": triton.__version__,
        "tool_version": __version__,
        "template_hashes": {f: template_hash(f) for f in family_names()},
        "cross_compiled_for": device.target,
        "scope": scope,  # the problems and buckets predicted: the default grid, or predict's filters
        "notes": list(prediction.notes),
        "selection": ("per (problem, bucket) the point of tuner.space.feasible_points with the least predicted score "
                      "(tuner.model: decode full + quarter-filled, prefill one time) among those cross-compiled for "
                      "the target within its limits (xcompile status ok); nothing here was timed on the GPU. Turn it "
                      "into a tuned table on the GPU: `python cli.py tune --seed-table <this dispatch.json>`"),
    }
    table = {"format": FORMAT, "provenance": provenance, "modules": modules, "entries": entries, "defaults": {}}
    return table, {m["file"] for m in modules.values()}


def same_inputs(provenance: dict, device: Device) -> bool:
    """Whether a predicted table's provenance records what a prediction for `device` would now
    start from (device properties, model, templates, Triton, tool): then predicting again would
    write the same table, given the same compile results."""
    import triton

    return (provenance.get("kind") == "predicted" and provenance.get("scope") == DEFAULT_SCOPE
            and provenance.get("device") == json.loads(json.dumps(device.to_dict()))
            and provenance.get("model_version") == MODEL_VERSION and provenance.get("triton_version") == triton.__version__
            and provenance.get("tool_version") == __version__
            and provenance.get("template_hashes") == {f: template_hash(f) for f in family_names()})


def emit_predicted(prediction: Prediction, device: Device, out_root: Path,
                   scope: str = DEFAULT_SCOPE) -> list[EmitResult]:
    """Write the predicted table under the device's first slug and a same_as pointer under the others."""
    slug = device.slugs[0]
    directory = predicted_dir(out_root, slug)
    directory.mkdir(parents=True, exist_ok=True)
    result = EmitResult(slug, directory, 0, 0, notes=list(prediction.notes))
    table, files = build_predicted_table(prediction, device, directory, result, scope)
    result.entries, result.modules = len(table["entries"]), len(table["modules"])
    _write_dir(directory, table, files, result)
    results = [result]
    for other in device.slugs[1:]:
        odir = predicted_dir(out_root, other)
        odir.mkdir(parents=True, exist_ok=True)
        alias = EmitResult(other, odir, result.entries, result.modules)
        if write_if_different(odir / SAME_AS_FILE, slug + "\n"):
            alias.written.append(SAME_AS_FILE)
        results.append(alias)
    return results
