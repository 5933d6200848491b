"""The trial store: one SQLite file under db/, written with sqlite-utils.

One row per measured (GPU, problem, bucket, config): its status and reason, its timings (each
naming the timer that produced them), its fraction of the floor, its compile resources and
everything that can change a timing (GPU, capability, SM count, driver, versions, template
hash). Rows are keyed by `trial_key` so a resumed or repeated run never measures a config twice.
Writes are single statements in autocommit mode, so a killed process loses at most the trial
it was measuring.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import sqlite_utils

from indexer_logits._identity import Bucket, Config, Problem, canonical_json, sha256_hex

from .families import family_of
from .ownership import owner_alive

SCHEMA_VERSION = 1

# Status values a trial may take. Everything but "ok" is infeasible for the search.
STATUSES = ("ok", "infeasible", "compile_error", "wrong_answer", "unwritten", "mask", "graph_unsafe",
            "reads_past_valid_pages", "timeout", "crash", "error")
RETRIED_STATUSES = ("error",)  # not the candidate's fault: measured again on the next run, kept out of merges
FULL_TIMING = "(fidelity is null or fidelity != 'short')"  # SQL: a row that may win (rows before the column are full)


@dataclass
class TrialRow:
    trial_key: str
    run_id: str
    created_at: str
    gpu_slug: str
    family: str
    problem_json: str
    problem_key: str
    bucket_batch: int
    bucket_context: int
    config_json: str
    config_key: str
    variant: str
    status: str
    reason: str = ""
    timer: str = ""  # "cuda_graph" | "wall_clock" | "" (not timed)
    p20_ms: Optional[float] = None  # full-width lengths
    p50_ms: Optional[float] = None
    p80_ms: Optional[float] = None
    partial_p50_ms: Optional[float] = None  # partly filled table (decode), same timer
    score_ms: Optional[float] = None  # the search objective: p50 + partial_p50 (decode) or p50
    floor_ms: Optional[float] = None
    frac_of_floor: Optional[float] = None  # floor / p50
    partial_frac_of_floor: Optional[float] = None
    rel_err: Optional[float] = None
    registers: Optional[int] = None
    spills: Optional[int] = None
    shared_bytes: Optional[int] = None
    gpu_name: str = ""
    compute_capability: str = ""
    sm_count: int = 0
    driver: str = ""
    cuda_version: str = ""
    torch_version: str = ""
    triton_version: str = ""
    template_hash: str = ""
    tool_version: str = ""
    copy_bw: Optional[float] = None  # bytes/s measured at the start of the run
    matmul_rate: Optional[float] = None  # flop/s measured at the start of the run
    source: str = ""  # "optuna:tpe" | "seed:default" | "seed:neighbour" | "grid" | ...
    # "full": timed with the full replay count; "short": cut after a short timing because it was
    # well behind the bucket's best (tuner.evaluate), so it never wins: emit and summaries skip it.
    fidelity: str = "full"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trial_key(gpu_slug: str, problem: Problem, bucket: Bucket, config: Config, template_hash: str, timer: str) -> str:
    """Everything that identifies a measurement; a different template or timer is a new trial."""
    return sha256_hex(canonical_json({
        "gpu": gpu_slug, "problem": problem.key, "bucket": bucket.key, "config": config.key,
        "template": template_hash, "timer": timer,
    }))


def gate_key(gpu_slug: str, problem: Problem, config: Config, template_hash: str) -> str:
    """Gates are per (problem, config) on one GPU, not per bucket: one verdict serves every bucket."""
    return sha256_hex(canonical_json({
        "gpu": gpu_slug, "problem": problem.key, "config": config.key, "template": template_hash,
    }))


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """Thin wrapper over the SQLite file; safe to open from several processes (WAL, busy timeout)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:  # locked, busy: not a verdict on the file
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:  # e.g. "file is not a database": a clear refusal, not a traceback
            conn.close()
            raise ValueError(f"db: {self.path} is not an SQLite trial store ({exc})") from None
        conn.execute("PRAGMA busy_timeout=60000")
        self.db = sqlite_utils.Database(conn)
        self._migrate()

    def _migrate(self) -> None:
        meta = self.db["meta"]
        if not meta.exists():
            meta.insert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key")
        version = int(meta.get("schema_version")["value"])
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"db: {self.path} has schema version {version}, this tool writes {SCHEMA_VERSION}; "
                "move it aside or re-tune (no migration exists for that version)"
            )
        if not self.db["trials"].exists():
            columns = {f.name: _sql_type(f) for f in dataclasses.fields(TrialRow)}
            self.db["trials"].create(columns, pk="trial_key", not_null={"trial_key", "status"})
            self.db["trials"].create_index(["gpu_slug", "problem_key", "bucket_batch", "bucket_context"], if_not_exists=True)
        elif "fidelity" not in self.db["trials"].columns_dict:  # added within schema 1: old rows are full timings
            self.db["trials"].add_column("fidelity", str)
        if not self.db["gates"].exists():  # added within schema 1: a new table, old files gain it
            self.db["gates"].create({"gate_key": str, "run_id": str, "created_at": str, "gpu_slug": str,
                                     "problem_key": str, "config_key": str, "variant": str, "template_hash": str,
                                     "status": str, "reason": str, "rel_err": float, "registers": int,
                                     "spills": int, "shared_bytes": int}, pk="gate_key")
        if not self.db["runs"].exists():
            self.db["runs"].create({"run_id": str, "started_at": str, "env_json": str, "args_json": str,
                                    "copy_bw": float, "matmul_rate": float}, pk="run_id")
        if not self.db["claims"].exists():  # added within schema 1 (tuner.ownership.claim_once)
            self.db["claims"].create({"claim_key": str, "owner": str, "claimed_at": str}, pk="claim_key")

    # -- claims: which process measures a key (several workers on one store) ---------------

    def claim(self, key: str, owner: str) -> tuple[bool, str]:
        """(True, owner) when `owner` now holds `key`, or (False, the holder). A claim whose
        holder is gone (tuner.ownership.owner_alive) is taken over, atomically."""
        while True:
            cur = self.db.execute("insert or ignore into claims (claim_key, owner, claimed_at) values (?, ?, ?)",
                                  [key, owner, now_iso()])
            if cur.rowcount == 1:
                return True, owner
            row = self.db.execute("select owner, claimed_at from claims where claim_key = ?", [key]).fetchone()
            if row is None:
                continue  # released in between
            holder, claimed_at = row
            if holder == owner:
                return True, owner
            held_s = (_dt.datetime.now(_dt.timezone.utc) - _dt.datetime.fromisoformat(claimed_at)).total_seconds()
            if owner_alive(holder, held_s):
                return False, holder
            cur = self.db.execute("update claims set owner = ?, claimed_at = ? where claim_key = ? and owner = ?",
                                  [owner, now_iso(), key, holder])
            if cur.rowcount == 1:
                return True, owner

    def release(self, key: str, owner: str) -> None:
        self.db.execute("delete from claims where claim_key = ? and owner = ?", [key, owner])

    def record(self, row: TrialRow) -> None:
        if row.status not in STATUSES:
            raise ValueError(f"status: expected one of {list(STATUSES)}, got {row.status!r}")
        self.db["trials"].upsert(row.to_dict(), pk="trial_key")

    def get(self, key: str) -> Optional[dict]:
        try:
            return self.db["trials"].get(key)
        except sqlite_utils.db.NotFoundError:
            return None

    def record_gate(self, row: dict) -> None:
        """One gate verdict (see `gate_key`); status is "ok" or a failure tag from STATUSES."""
        if row.get("status") not in STATUSES:
            raise ValueError(f"status: expected one of {list(STATUSES)}, got {row.get('status')!r}")
        self.db["gates"].upsert(row, pk="gate_key")

    def get_gate(self, key: str) -> Optional[dict]:
        try:
            return self.db["gates"].get(key)
        except sqlite_utils.db.NotFoundError:
            return None

    def record_run(self, run_id: str, env_json: str, args_json: str, copy_bw: float | None, matmul_rate: float | None) -> None:
        self.db["runs"].upsert({"run_id": run_id, "started_at": now_iso(), "env_json": env_json,
                                "args_json": args_json, "copy_bw": copy_bw, "matmul_rate": matmul_rate}, pk="run_id")

    def trials(self, where: str | None = None, params: Iterable = ()) -> list[dict]:
        return list(self.db["trials"].rows_where(where, list(params)))

    def winners(self, gpu_slug: str) -> list[dict]:
        """The best ok trial per (problem, bucket) on one GPU, by score then by key (stable)."""
        rows = self.trials(f"gpu_slug = ? and status = 'ok' and score_ms is not null and {FULL_TIMING}", [gpu_slug])
        best: dict[tuple, dict] = {}
        for r in rows:
            k = (r["problem_key"], r["bucket_batch"], r["bucket_context"])
            if k not in best or (r["score_ms"], r["trial_key"]) < (best[k]["score_ms"], best[k]["trial_key"]):
                best[k] = r
        return [best[k] for k in sorted(best, key=lambda k: (best[k]["family"], best[k]["problem_json"], k[1], k[2]))]


def score_of(problem: Problem, timings: dict) -> float:
    """The objective of a timing reply, as fill_timings computes it."""
    score = timings["full"]["p50_ms"]
    if "partial" in timings and "quarter" in family_of(problem).timing_lens:
        score += timings["partial"]["p50_ms"]
    return score


def fill_timings(row: TrialRow, problem: Problem, timings: dict) -> None:
    """The objective: p50 at full lengths plus p50 at partly filled lengths (decode), else p50."""
    full = timings["full"]
    row.timer = full["method"]
    row.p20_ms, row.p50_ms, row.p80_ms = full["p20_ms"], full["p50_ms"], full["p80_ms"]
    row.floor_ms = full.get("floor_ms")
    if row.floor_ms:
        row.frac_of_floor = row.floor_ms / row.p50_ms
    row.score_ms = score_of(problem, timings)
    if "partial" in timings and "quarter" in family_of(problem).timing_lens:
        part = timings["partial"]
        row.partial_p50_ms = part["p50_ms"]
        if part.get("floor_ms"):
            row.partial_frac_of_floor = part["floor_ms"] / part["p50_ms"]


def merge_stores(into: Store, sources: Iterable[str | Path]) -> dict[str, int]:
    """Copy the trials, gates and runs of other stores (other hosts) into `into`, one row per
    key: a row already there is kept, unless it is a retried 'error' and the other is not.
    Sources are opened read-only. Returns counts: rows added, replaced, and kept."""
    counts = {"added": 0, "replaced": 0, "kept": 0}
    for source in sources:
        source = Path(source)
        if not source.is_file():
            raise ValueError(f"db: {source} does not exist")
        if source.resolve() == into.path.resolve():
            raise ValueError(f"db: {source} is the store being merged into")
        conn = sqlite3.connect(f"file:{source.resolve()}?mode=ro", uri=True, timeout=60)
        conn.row_factory = sqlite3.Row
        try:
            version = conn.execute("select value from meta where key = 'schema_version'").fetchone()
            if version is None or int(version[0]) != SCHEMA_VERSION:
                raise ValueError(f"db: {source} has schema version {version and version[0]}, this tool writes "
                                 f"{SCHEMA_VERSION}")
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
            for table, pk, getter in (("trials", "trial_key", into.get), ("gates", "gate_key", into.get_gate)):
                for row in conn.execute(f"select * from {table}") if table in tables else ():
                    row = dict(row)
                    have = getter(row[pk])
                    if have is None or (have["status"] in RETRIED_STATUSES and row["status"] not in RETRIED_STATUSES):
                        into.db[table].upsert(row, pk=pk)
                        counts["added" if have is None else "replaced"] += 1
                    else:
                        counts["kept"] += 1
            for row in conn.execute("select * from runs") if "runs" in tables else ():
                into.db["runs"].insert(dict(row), pk="run_id", ignore=True)
        finally:
            conn.close()
    return counts


def _sql_type(f: dataclasses.Field):
    t = str(f.type)
    if "float" in t:
        return float
    if "int" in t:
        return int
    return str
