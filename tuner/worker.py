"""Crash isolation: gates and timings run in a separate worker process.

A candidate can kill the CUDA context (an illegal address poisons every later call in that
process) or hang. The tuner therefore never runs a candidate itself: it sends requests over a
Pipe to a worker started with multiprocessing 'spawn' (a fresh interpreter: no inherited CUDA
state, and TRITON_INTERPRET set or unset before any candidate's kernel module is loaded; the
two kernels of tuner.faults, defined when this module is imported, run only on a GPU worker).
A request that gets no answer within its timeout ends the worker ('timeout'); a worker that
dies or reports a lost CUDA context is reaped ('crash'). The next request starts a fresh
worker, which first replays the remembered "prepare" requests (its inputs), so the search goes
on where it was.

Protocol: the parent sends (kind, payload); the worker answers (status, detail, data) where
status is "ok" or a trial status tag (see tuner.store.STATUSES), and `fatal` in data means the
worker exits after answering (its context is unusable).

Test hook: the environment variable INDEXER_TUNER_FAULTS, JSON like
{"crash": ["<config slug>", ...], "hang": ["<config slug>", ...]}, makes the worker die
(os._exit) or sleep forever when asked to gate or time a config with that slug. On a GPU,
"gpu_crash" and "gpu_hang" do it on the device instead (tuner.faults): a kernel that writes to an
illegal address (the CUDA context is lost) or one that never finishes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
import traceback
from dataclasses import dataclass, field

from indexer_logits._identity import Config

from .faults import hang, illegal_address
from .interp import interpreter_env, set_interpreter
from .tasks import Tasks, TaskFailure, classify

FAULTS_ENV = "INDEXER_TUNER_FAULTS"
READY_TIMEOUT_S = 300.0  # importing torch + triton and initialising CUDA, on a busy host
FAULT_EXIT_CODE = 70


@dataclass
class Reply:
    status: str  # "ok" or a trial status tag: "timeout", "crash", "compile_error", "wrong_answer", ...
    detail: str = ""
    data: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class WorkerUnavailable(RuntimeError):
    """The worker could not be (re)started or could not rebuild its inputs."""


def exit_with_parent(poll_s: float = 1.0) -> None:
    """End this process when its parent dies (a killed tuner must not leave workers behind that
    hold GPU memory). A daemon thread watches the parent pid."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def pool_init(interpret: bool) -> None:
    """Initializer of the build pool's processes (tuner.prebuild): same rules as the worker."""
    set_interpreter(interpret)
    exit_with_parent()


class Worker:
    """Parent-side handle of the gate/timing worker. Not thread-safe; one request at a time."""

    def __init__(self, interpret: bool, ready_timeout: float = READY_TIMEOUT_S):
        self.interpret = interpret
        self.ready_timeout = ready_timeout
        self.starts = 0  # processes started so far (more than one: crashes, hangs)
        self._ctx = multiprocessing.get_context("spawn")
        self._proc = None
        self._conn = None
        self._ready = False
        self._prepared: dict[str, tuple[str, dict, float]] = {}

    # -- requests ---------------------------------------------------------------------------

    def request(self, kind: str, payload: dict, timeout: float) -> Reply:
        """Send one request; a hang or a death of the worker comes back as a Reply."""
        self._ensure_started()
        return self._roundtrip(kind, payload, timeout)

    def prepare(self, key: str, kind: str, payload: dict, timeout: float) -> Reply:
        """A request that builds worker state (inputs): remembered under `key` and replayed,
        in order, into every restarted worker."""
        self._prepared.pop(key, None)
        self._ensure_started()
        reply = self._roundtrip(kind, payload, timeout)
        if reply.ok:
            self._prepared[key] = (kind, payload, timeout)
        return reply

    def forget(self, key: str) -> None:
        self._prepared.pop(key, None)

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._conn.send(("stop", {}))
            self._proc.join(10)
        except (OSError, EOFError):
            pass
        self._kill()

    # -- process management -----------------------------------------------------------------

    def _roundtrip(self, kind: str, payload: dict, timeout: float) -> Reply:
        try:
            self._conn.send((kind, payload))
        except (OSError, EOFError):
            return Reply("crash", f"the worker died before the request ({self._reap()})")
        if not self._conn.poll(timeout):
            self._kill()
            return Reply("timeout", f"no answer within {timeout:g} s; the worker was killed")
        try:
            status, detail, data = self._conn.recv()
        except (OSError, EOFError):
            return Reply("crash", f"the worker process died ({self._reap()})")
        if data.get("fatal"):
            self._reap()
        return Reply(status, detail, data)

    def start(self) -> None:
        """Start the worker process without waiting for it (its imports overlap other work)."""
        if self._proc is not None and (self._proc.is_alive() or not self._ready):
            return
        if self._proc is not None:
            self._reap()
        self.starts += 1
        parent_conn, child_conn = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=serve, args=(child_conn, self.interpret), name="tuner-worker",
                                       daemon=True)
        with interpreter_env(self.interpret):
            self._proc.start()
        child_conn.close()
        self._conn = parent_conn
        self._ready = False

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.is_alive() and self._ready:
            return
        self.start()
        parent_conn = self._conn
        if not parent_conn.poll(self.ready_timeout):
            self._kill()
            raise WorkerUnavailable(f"the worker did not start within {self.ready_timeout:g} s")
        try:
            parent_conn.recv()
        except (OSError, EOFError):
            raise WorkerUnavailable(f"the worker died while starting ({self._reap()})") from None
        self._ready = True
        for key, (kind, payload, timeout) in list(self._prepared.items()):
            reply = self._roundtrip(kind, payload, timeout)
            if not reply.ok:
                self._prepared.pop(key, None)
                raise WorkerUnavailable(f"a restarted worker could not rebuild {key}: {reply.status}: {reply.detail}")

    def _kill(self) -> None:
        if self._proc is None:
            return
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(10)
        self._close_conn()
        self._proc = None

    def _reap(self) -> str:
        """Wait for a dying worker; returns a description of how it ended."""
        if self._proc is None:
            return "no worker"
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(10)
        code = self._proc.exitcode
        self._close_conn()
        self._proc = None
        return f"exit code {code}"

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# --------------------------------------------------------------------------------------------
# The worker process.

def _inject_fault(kind: str, payload: dict) -> None:
    """The test hook (see the module docstring): die or hang on chosen config slugs, on the host
    or on the device (a device fault raises here like a broken candidate would)."""
    spec = os.environ.get(FAULTS_ENV)
    if not spec or kind not in ("gate", "time"):
        return
    slug = Config.from_json(payload["config"]).slug
    faults = json.loads(spec)
    if slug in faults.get("crash", ()):
        os._exit(FAULT_EXIT_CODE)  # as abrupt as a segfault or a CUDA abort: no reply, no cleanup
    if slug in faults.get("hang", ()):
        while True:
            time.sleep(3600)
    if slug in faults.get("gpu_crash", ()):
        illegal_address()
    if slug in faults.get("gpu_hang", ()):
        hang()


def serve(conn, interpret: bool) -> None:
    """Worker main loop. The interpreter choice is made first: the candidates' kernel modules
    are loaded afterwards, request by request."""
    set_interpreter(interpret)
    exit_with_parent()
    tasks = Tasks(device="cpu" if interpret else "cuda")
    conn.send(("ready", "", {}))
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the parent is gone
        if kind == "stop":
            return
        try:
            tasks.stage = kind  # a fault injected below is classified as this request's
            _inject_fault(kind, payload)
            data = tasks.handle(kind, payload)
        except TaskFailure as exc:
            status, detail, fatal = exc.status, exc.detail, exc.fatal
        except BaseException as exc:  # noqa: BLE001 - every failure becomes data for the search
            status, fatal = classify(exc, tasks.stage)
            detail = "".join(traceback.format_exception(exc))[-4000:]
        else:
            conn.send(("ok", "", data))
            continue
        conn.send((status, detail, {"fatal": fatal}))
        if fatal:  # a lost CUDA context fails every later call: let the parent start a fresh worker
            conn.close()
            os._exit(3)
