"""Helpers shared by several test modules (imported as `import _helpers`, like _loop_oracle)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import torch

from indexer_logits._identity import Config, Problem
from tuner.reference import relative_error
from tuner.render import emit, load_module
from tuner.space import check


def trial_rows(db: Path) -> dict[str, dict]:
    """Every row of a trial store, by trial key, read with plain sqlite3 (not through the Store)."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return {r["trial_key"]: dict(r) for r in con.execute("select * from trials")}
    finally:
        con.close()


def launches_of(monkeypatch, kernel: str) -> list:
    """The keyword arguments of every top-k selection launch of `kernel` (its function's name) from here on,
    recorded or not: the selection's launches go through _topk_select's _recorded_launches.run."""
    from indexer_logits import _topk_select as S
    seen, real = [], S._recorded_launches.run

    def run(tag, inputs, scalars, launches, out_index):
        def spied(launch):
            def one(fn, grid, *args, **kw):
                if fn.fn.__name__ == kernel:
                    seen.append(kw)
                return launch(fn, grid, *args, **kw)
            return launches(one)
        return real(tag, inputs, scalars, spied, out_index)
    monkeypatch.setattr(S._recorded_launches, "run", run)
    return seen


def check_output(buf, out, ref, valid, clean: bool, rule: str) -> None:
    """A kernel's output `out` (a view of `buf`, NaN-filled past its width) against the reference
    on the valid positions; with clean logits, -inf exactly off `valid` (`rule` names that rule)."""
    assert bool(torch.isnan(buf[:, out.shape[1]:]).all()), "wrote past the output width"
    assert bool(torch.isfinite(out[valid]).all()), "a valid position was not written (or is not finite)"
    err = relative_error(out.cpu(), ref.cpu(), valid.cpu())
    assert err < 1e-3, f"relative error {err:.3g}"
    if clean:
        assert torch.equal(torch.isneginf(out), ~valid), f"-inf mask differs from {rule}"


def checked_module(problem: Problem, config: Config, out_dir: Path):
    """The rendered kernel module of `config`, emitted into `out_dir` and imported; the config must
    stay inside the space as the space evolves (a sample of it would silently drift otherwise)."""
    check(problem, config)
    return load_module(emit(problem, config, out_dir))
