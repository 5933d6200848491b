"""Processes that share one search: who owns a trial or a claim, and the storage they share.

Several tuning processes may work on one search: one per local GPU (`tune --workers N`, started
by tuner.launch), and hosts that share their studies through a database server
(`tune --storage postgresql://...`).

- The studies live in one Optuna storage every process opens (`open_storage`): an SQLite file
  for a single process (the default), a journal file (`db/optuna.journal`) for the workers of
  one host, or an RDB URL (PostgreSQL) for several hosts.
- Each process is an *owner*: `host|pid|start time|run id`. A trial it asks carries its owner
  (user attribute "owner"), so another process can tell a trial in flight from one left behind
  by a dead process (same host: the pid is gone or is another process; other hosts: after
  REMOTE_STALE_S).
- Measurements are claimed in the host's trial store before they start (`claim_once`): one
  process measures a (trial or gate) key, the others wait for its row and read it. A claim whose
  owner died is taken over.

Imports no other module of the tuner (the trial store, the evaluator and the search import it),
and not torch: a worker must choose its GPU before CUDA starts.
"""

from __future__ import annotations

import os
import socket
import time
import zlib
from pathlib import Path
from typing import Callable, Optional, TypeVar

T = TypeVar("T")

UNOWNED_GRACE_S = 60.0  # a trial is asked, then given its owner: that long it may have none
# Overrides UNOWNED_GRACE_S (seconds). A trial asked by a process killed before it wrote its owner
# has none: until it is this old, every process must take it for one being asked right now, so a
# run resumed at once leaves it RUNNING for the next run. Asking takes milliseconds on one host.
UNOWNED_GRACE_ENV = "INDEXER_TUNER_UNOWNED_GRACE_S"
REMOTE_STALE_S = 3600.0  # a trial another host has held this long is taken to be left behind
CLAIM_POLL_S = 0.1


# --------------------------------------------------------------------------------------------
# Storage.

def is_journal(spec: str) -> bool:
    """A storage spec without a URL scheme is a journal file path."""
    return "://" not in spec


def open_storage(spec: str):
    """The Optuna storage `spec` names: a journal file path, or an RDB URL (sqlite:///...,
    postgresql://user@host:port/db, ...)."""
    import optuna

    if is_journal(spec):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        Path(spec).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(spec)))
    if spec.startswith("sqlite"):
        return optuna.storages.RDBStorage(spec, engine_kwargs={"connect_args": {"timeout": 60}})
    # A server: reconnect after idle periods (a long bucket build) rather than fail.
    return optuna.storages.RDBStorage(with_driver(spec), engine_kwargs={"pool_pre_ping": True})


def with_driver(url: str) -> str:
    """A plain postgresql:// URL with the driver that is installed: SQLAlchemy 2.0 defaults to
    psycopg2, 2.1 to psycopg (3); either serves."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    import importlib.util

    rest = url.split("://", 1)[1]
    for module, dialect in (("psycopg2", "postgresql+psycopg2"), ("psycopg", "postgresql+psycopg")):
        if importlib.util.find_spec(module) is not None:
            return f"{dialect}://{rest}"
    return url


def describe_storage(spec: str) -> str:
    """The spec without a password, for messages."""
    if is_journal(spec):
        return f"journal file {spec}"
    scheme, _, rest = spec.partition("://")
    if "@" in rest:
        cred, _, where = rest.rpartition("@")
        rest = f"{cred.split(':', 1)[0]}:***@{where}" if ":" in cred else rest
    return f"{scheme}://{rest}"


def sampler_seed(seed: int, index: int) -> int:
    """Distinct per worker and host, stable per (seed, host, worker): processes sharing a study
    must not propose the same sequence."""
    return (seed * 1_000_003 + zlib.crc32(f"{socket.gethostname()}/{index}".encode())) % (2**31)


# --------------------------------------------------------------------------------------------
# Owners.

def _start_time(pid: int) -> Optional[str]:
    """The process's start time (clock ticks since boot) from /proc, or None where unreadable.
    Tells a live process from a later one that reuses its pid; a zombie counts as gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    if fields and fields[0] == "Z":
        return "zombie"
    return fields[19] if len(fields) > 19 else None


def owner_tag(run_id: str) -> str:
    """This process as an owner of trials and claims."""
    pid = os.getpid()
    return f"{socket.gethostname()}|{pid}|{_start_time(pid) or '-'}|{run_id}"


def owner_run_id(tag: str) -> str:
    return tag.split("|", 3)[3] if tag.count("|") >= 3 else ""


def unowned_grace_s() -> float:
    """How long an unowned RUNNING trial counts as being asked by a live process: UNOWNED_GRACE_S,
    or the number in $INDEXER_TUNER_UNOWNED_GRACE_S."""
    spec = os.environ.get(UNOWNED_GRACE_ENV)
    if spec is None or spec.strip() == "":
        return UNOWNED_GRACE_S
    try:
        value = float(spec)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{UNOWNED_GRACE_ENV}: expected a number of seconds >= 0, got {spec!r}")
    return value


def owner_alive(tag: str, held_s: float | None = None) -> bool:
    """Whether the owner of a trial or claim may still be working on it. Same host: its process
    exists and started when the tag says. Another host: not known, so held under REMOTE_STALE_S
    (`held_s`: how long it has been held; None: assume alive)."""
    parts = tag.split("|", 3)
    if len(parts) != 4:
        return False
    host, pid, started, _ = parts
    if host != socket.gethostname():
        return held_s is None or held_s < REMOTE_STALE_S
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    except ValueError:
        return False
    now = _start_time(pid)
    if now == "zombie":
        return False
    return started == "-" or now is None or now == started


# --------------------------------------------------------------------------------------------
# Claims: each measurement once among the processes sharing a trial store.

def claim_once(store, key: str, owner: str, compute: Callable[[], tuple[T, bool]],
               lookup: Callable[[Optional[str]], Optional[T]], *, deadline: float | None = None,
               wait_cap_s: float = 3600.0) -> Optional[T]:
    """`compute()` for `key` in one process only; the others wait and `lookup` its result.

    compute() returns (result, stored): when `stored` is False (a harness error that is not
    recorded) the claim is released so that another process may try. lookup(holder) returns the
    stored result or None; holder is the claim's owner (None after this process won the claim:
    then only a final result counts, as on a resume). Returns None when `deadline`
    (time.monotonic) passes or the holder outlives `wait_cap_s` while this process waits."""
    waited_from = time.monotonic()
    while True:
        won, holder = store.claim(key, owner)
        if won:
            found = lookup(None)
            if found is not None:
                return found
            try:
                result, stored = compute()
            except BaseException:
                store.release(key, owner)
                raise
            if not stored:
                store.release(key, owner)
            return result
        found = lookup(holder)
        if found is not None:
            return found
        now = time.monotonic()
        if (deadline is not None and now > deadline) or now - waited_from > wait_cap_s:
            return None
        time.sleep(CLAIM_POLL_S)
