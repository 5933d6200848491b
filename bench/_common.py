"""What several bench tools share: the repository root, candidate template folders, the table's
module for a bucket, config lists from the command line, the no-GPU refusal."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"


def default_results() -> Path:
    """The bench results file the run readers default to: the only docs/results/bench_*.jsonl if
    there is one, else the H200's (the GPU the committed runs were measured on)."""
    found = sorted(RESULTS.glob("bench_*.jsonl"))
    return found[0] if len(found) == 1 else RESULTS / "bench_nvidia_h200.jsonl"


def no_cuda(hint: str = "") -> int:
    """Say that this needs a CUDA device (and what to run instead); the exit status to return."""
    print("no CUDA device: run on the GPU host" + (f", or {hint}" if hint else ""), file=sys.stderr)
    return 2


def overlay(alt: Path) -> Path:
    """templates/ with the .jinja files of `alt` (a candidate, e.g. experiments/<name>) put over it,
    in a new temporary folder."""
    alt = Path(alt)
    if not alt.is_dir() or not any(alt.glob("*.jinja")):
        raise SystemExit(f"--alt: expected a folder of .jinja templates, got {alt}")
    out = Path(tempfile.mkdtemp(prefix="templates_alt_"))
    shutil.copytree(ROOT / "templates", out, dirs_exist_ok=True)
    for f in alt.glob("*.jinja"):
        shutil.copy(f, out / f.name)
    return out


def parse_override(text: str, what: str = "--override") -> dict:
    """Config fields from a JSON object or from KEY=VALUE[,KEY=VALUE] (no quotes to survive a
    bench.host step's shlex split), {} for ''; each a Config field (ValueError otherwise)."""
    import dataclasses

    from indexer_logits._identity import Config

    if not text:
        return {}
    try:
        if text.lstrip().startswith("{"):
            fields = json.loads(text)
        else:
            pairs = [item.split("=", 1) for item in text.split(",")]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"{what}: expected a JSON object or KEY=VALUE[,KEY=VALUE], got {text!r}")
            fields = {k.strip(): int(v) if v.strip().isdigit() else v.strip() for k, v in pairs}
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    names = {f.name for f in dataclasses.fields(Config)}
    if not isinstance(fields, dict) or not set(fields) <= names:
        raise ValueError(f"{what}: expected a JSON object of Config fields {sorted(names)}, got {text!r}")
    Config.from_dict({**Config().to_dict(), **fields})  # a bad value is refused here, not after the compiles
    return fields


def parse_configs(text: str, what: str = "--configs") -> list:
    """Configs from a JSON list of config dicts, or from @FILE holding one (ValueError if neither)."""
    from indexer_logits._identity import Config

    if not text:
        return []
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as exc:
            raise ValueError(f"{what}: cannot read {text[1:]!r}: {exc.strerror}") from None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if not isinstance(items, list) or not all(isinstance(c, dict) for c in items):
        raise ValueError(f"{what}: expected a JSON list of config objects")
    try:
        return [Config.from_dict(c) for c in items]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def module_for(problem, bucket):
    """(path, variant) of this GPU's dispatch-table module for a decode bucket. The choice depends
    on shapes only, so no inputs are built for it."""
    import torch

    from indexer_logits import _dispatch

    sel = _dispatch.select(torch.device("cuda", torch.cuda.current_device()), problem.to_dict(),
                           (bucket.batch, bucket.context))
    if sel.variant is None:
        raise SystemExit(f"no kernel in the dispatch table for {bucket}: {sel}")
    return Path(sel.table).parent / f"{sel.variant}.py", sel.variant


def module_config(text: str):
    """The Config a generated module was rendered from (its header's `# config:` line)."""
    from indexer_logits._identity import Config

    marker = "\n# config:  "
    if marker not in text:
        raise ValueError("not a generated module: no '# config:' header line")
    return Config(**json.loads(text.split(marker, 1)[1].split("\n", 1)[0]))
