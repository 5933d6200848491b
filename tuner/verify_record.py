"""`verify --record`: what verify found, per bucket, written into the table it checked.

Each checked entry of dispatch.json gets a field `verified`: {ok, calc_diff, worst_row_calc_diff,
rel_err, rounding_bound_ratio, rows_checked, rows, mask, poisoned_table, shape, seconds, gates, how,
device, triton, torch, date, seed}; each module checked on the large pool an item of the top-level
`verified_pool` {variant: {...}}. Nothing else changes: no module file, no sha256, no other
field (the table is re-serialised the way emit writes it). The runtime ignores both fields
(indexer_logits._tables.validate_table reads only what it needs), `ship` copies them, and `emit`
carries a record over while its entry's variant, bucket and module code are unchanged
(`carry_records`: the bytes, or the bytes but the header's template hash, `code_digest`).

A run records only into the table of the device it ran on (the table's slug equals the running
GPU's slug, or `cpu` under the interpreter): a CPU run cannot vouch for an H200 table. A check
skipped for memory writes nothing (an older record stays).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from indexer_logits import _dispatch
from indexer_logits._tables import table_text


def _stamp(env: dict, when: str, seed: int, row) -> dict:
    return {"how": row.how, "device": env.get("device", "?"), "triton": env.get("triton", "?"),
            "torch": env.get("torch", "?"), "date": when, "seed": seed}


def entry_record(row, env: dict, when: str, seed: int) -> Optional[dict]:
    """The `verified` field of one checked entry, or None when there is nothing to record."""
    if row.full is not None and not row.full.ran:
        return None
    record = {"ok": bool(row.ok), "gates": f"{row.gates} at {row.shape}"}
    if row.full is not None:
        record.update(row.full.record())
    record.update(_stamp(env, when, seed, row))
    return record


def pool_record(row, env: dict, when: str, seed: int) -> Optional[dict]:
    if row.full is None or not row.full.ran:
        return None
    record = {"ok": bool(row.ok), "case": row.full.text}
    record.update(row.full.record())
    record.pop("shape", None)
    record.update(_stamp(env, when, seed, row))
    return record


def record_rows(root: Path, rows: list, device_slug: str, env: dict, seed: int,
                when: Optional[str] = None) -> list[str]:
    """Write the rows' records into the tables under root; returns one note per table."""
    when = when or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    notes = []
    for slug in sorted({r.table for r in rows if r.what in ("entry", "pool")}):
        if slug != device_slug:
            notes.append(f"not recorded in {slug}/: that table is for {slug}, this run is on {device_slug}")
            continue
        path = Path(root) / slug / _dispatch.TABLE_FILE
        table = json.loads(path.read_text())
        index = {(e["problem_key"], e["bucket"]["batch"], e["bucket"]["context"], e["variant"]): e
                 for e in table["entries"]}
        written = kept = pooled = 0
        for row in (r for r in rows if r.table == slug):
            if row.what == "entry":
                record = entry_record(row, env, when, seed)
                entry = index.get((row.problem_key, *row.bucket_shape, row.variant))
                if record is None or entry is None:
                    kept += 1
                    continue
                entry["verified"] = record
                written += 1
            elif row.what == "pool":
                record = pool_record(row, env, when, seed)
                if record is not None:
                    table.setdefault("verified_pool", {})[row.variant] = record
                    pooled += 1
        path.write_text(table_text(table))
        _dispatch.validate_table(json.loads(path.read_text()), path, slug)
        notes.append(f"recorded in {path}: {written} entries, {pooled} pool cases"
                     + (f" ({kept} not recorded: skipped)" if kept else ""))
    return notes


_TEMPLATE_STAMP = re.compile(r"template sha256 [0-9a-f]{64}")


def code_digest(module_text: str) -> str:
    """sha256 of a generated module's text without its header's template hash: a template change
    that renders a module byte for byte but for that comment leaves the verified code as it was."""
    return hashlib.sha256(_TEMPLATE_STAMP.sub("", module_text).encode()).hexdigest()


def carry_records(old: Optional[dict], new: dict, same_code: frozenset = frozenset()) -> int:
    """Copy `verified` from old's entries to new's where problem, bucket, variant and the module's
    sha256 are unchanged (or the variant is in `same_code`: its module's code_digest is), and
    `verified_pool` items whose module is unchanged. Returns how many."""
    if not old:
        return 0
    old_sha = {v: m.get("sha256") for v, m in (old.get("modules") or {}).items()}
    new_sha = {v: m.get("sha256") for v, m in new["modules"].items()}
    same = {v for v in new_sha if old_sha.get(v) == new_sha[v] or (v in same_code and v in old_sha)}
    records = {(e.get("problem_key"), (e.get("bucket") or {}).get("batch"), (e.get("bucket") or {}).get("context"),
                e.get("variant")): e["verified"] for e in old.get("entries") or [] if "verified" in e}
    carried = 0
    for e in new["entries"]:
        key = (e["problem_key"], e["bucket"]["batch"], e["bucket"]["context"], e["variant"])
        if key in records and e["variant"] in same:
            e["verified"] = records[key]
            carried += 1
    pool = {v: r for v, r in (old.get("verified_pool") or {}).items() if v in same}
    if pool:
        new["verified_pool"] = pool
        carried += len(pool)
    return carried
