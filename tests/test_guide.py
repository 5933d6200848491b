"""The guided tune (issue 25): the model's seeds (tuner.guide), the local search (tuner.space.neighbours,
tuner.climb, tuner.search), multi-fidelity timing (tuner.evaluate), `tune --engine` (tuner.presets)
and the run's ETA. No GPU: a fake evaluator with a known best config drives the search, a stub
worker drives the evaluator, and the CLI runs a tiny tune under the interpreter."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from indexer_logits._identity import Bucket, Config, Problem, variant_name
from tuner import climb as climb_mod
from tuner import guide
from tuner.devices import DEVICES
from tuner.evaluate import PROMOTE_WITHIN, Evaluator, RunContext, Verdict
from tuner.model import estimate_resources, rank_us
from tuner.optuna_space import OptunaSpace
from tuner.presets import engine_plan
from tuner.schedule import eta_s
from tuner.search import Search, SearchSettings
from tuner.space import TARGETS, axes_of, is_feasible, neighbours, tied
from tuner.store import Store, TrialRow, now_iso, trial_key
from tuner.summary import BucketSummary, fill_summary
from tuner.tables import build_gpu_table, EmitResult

H200 = DEVICES["h200"]
DECODE = Problem("decode_paged", "fp8", "fp8", 64, "page_blocked", 64, 128, 1, "1d")
TINY = Problem(heads=16, head_dim=32, page_size=32)  # fp8, next_n 1: the interpreter's problem
BEST = Config(block_t=64, tiles_per_program=8, num_warps=4, num_stages=3, orient="k_rows", store="run")


# -- the space: neighbours ---------------------------------------------------------------------

def test_neighbours_are_one_step_along_one_axis_and_feasible():
    near = neighbours(DECODE, BEST, TARGETS["sm_90"])
    assert BEST not in near and len(near) == len(set(near))
    axes = axes_of(DECODE)
    for c in near:
        changed = [k for k in axes if getattr(c, k) != getattr(BEST, k)]
        assert is_feasible(DECODE, c, TARGETS["sm_90"])
        if c.programs_per_sm:  # a persistent grid ties tiles per program to 1 (and its store to 'tile')
            assert c.tiles_per_program == 1 and c.programs_per_sm == 1
            continue
        if "store" in changed and len(changed) == 2:  # q_rows, or a tile past the page: no run store, tied to 'tile'
            assert c.store == "tile" and tied(DECODE, c) == c
            changed.remove("store")
        assert len(changed) == 1, (c.slug, changed)
        name = changed[0]
        values = axes[name]
        if isinstance(values[0], int):  # ordered: the next value either side
            assert abs(values.index(getattr(c, name)) - values.index(getattr(BEST, name))) == 1
    slugs = {c.slug for c in near}
    assert {"bt64_tp6_w4_s3_kr_sr", "bt64_tp12_w4_s3_kr_sr", "bt64_tp8_w4_s2_kr_sr", "bt64_tp8_w4_s4_kr_sr",
            "bt64_tp8_w8_s3_kr_sr", "bt64_tp8_w4_s3_kr"} <= slugs


def test_tied_sets_the_unused_knobs():
    assert tied(DECODE, dataclasses.replace(BEST, programs_per_sm=2)).tiles_per_program == 1
    assert tied(DECODE, dataclasses.replace(BEST, orient="q_rows")).store == "tile"
    assert tied(DECODE, BEST) == BEST


# -- the guide -------------------------------------------------------------------------------

def test_local_device_takes_the_calibration_and_knows_unknown_boards_by_their_arch():
    dev = guide.local_device("NVIDIA H200", 132, TARGETS["sm_90"], 4.0e12, 1.3e15, "fp8")
    assert dev.copy_bandwidth == 4.0e12 and dev.fp8_rate == 1.3e15 and dev.bf16_rate == H200.bf16_rate
    other = guide.local_device("Some Future GPU", 100, TARGETS["sm_120"], 1.5e12, 4.0e14, "bf16")
    assert other.target == "sm_120" and other.sm_count == 100 and other.bf16_rate == 4.0e14
    assert other.copy_bandwidth == 1.5e12
    with pytest.raises(ValueError, match="measured no"):
        guide.local_device("Some Future GPU", 100, TARGETS["sm_120"], None, None, "fp8")


def test_diverse_picks_differ_in_structure():
    a = BEST
    same_shape = dataclasses.replace(a, num_warps=8)  # warps are the climb's to change
    other = dataclasses.replace(a, tiles_per_program=12)
    assert guide.diverse([a, same_shape, other], 2) == [a, other]
    assert guide.diverse([a, other], 0) == []


def test_build_without_compiling_ranks_by_the_model_and_seeds_every_bucket():
    buckets = [Bucket(1, 4096), Bucket(64, 32768)]
    g = guide.build(H200, [(DECODE, buckets)], compile=False, seeds_per_bucket=3)
    for b in buckets:
        seeds = g.seeds_for(DECODE, b)
        assert len(seeds) == 3
        assert len({tuple(getattr(c, k) for k in guide.STRUCTURE) for c in seeds}) == 3
        times = [rank_us(H200, DECODE, c, estimate_resources(DECODE, c, H200), b.batch, b.context) for c in seeds]
        assert times == sorted(times)  # best first
        assert g.order(DECODE, b, list(reversed(seeds))) == list(seeds)
    # a one-request bucket wants short programs, a 64 x 32K one long runs (the notebook's lessons)
    assert g.seeds_for(DECODE, Bucket(1, 4096))[0].tiles_per_program < g.seeds_for(DECODE, Bucket(64, 32768))[0].tiles_per_program


# -- the local search, on a fake evaluator with a known best config --------------------------

class _Fake:
    """An evaluator whose score is the distance, in axis steps, from TARGET (plus 1 ms): a bowl the
    local search must descend. Records rows in a real store, as the search reads its summaries there."""

    def __init__(self, store: Store, target: Config):
        self.store, self.target, self.asked = store, target, []
        self.ctx = RunContext(run_id="fake", gpu_slug="cpu", timer="wall_clock", env={},
                              template_hashes={"decode_paged": "t"}, target=None, interpret=True, replays=1,
                              timeout_s=1, seed=0)

    def score(self, problem: Problem, config: Config) -> float:
        axes = axes_of(problem)
        steps = sum(abs(axes[k].index(getattr(config, k)) - axes[k].index(getattr(self.target, k)))
                    for k in ("block_t", "tiles_per_program", "num_warps", "num_stages"))
        return (1.0 + steps + (0 if config.store == self.target.store else 0.5)
                + (0 if config.head_sum == self.target.head_sum else 0.25))

    def evaluate(self, problem, bucket, configs, sources, deadline=None, on_verdict=None):
        out = []
        for i, (c, src) in enumerate(zip(configs, sources)):
            self.asked.append((c, src))
            s = self.score(problem, c)
            row = TrialRow(trial_key=trial_key("cpu", problem, bucket, c, "t", "wall_clock"), run_id="fake",
                           created_at=now_iso(), gpu_slug="cpu", family=problem.family, problem_json=problem.to_json(),
                           problem_key=problem.key, bucket_batch=bucket.batch, bucket_context=bucket.context,
                           config_json=c.to_json(), config_key=c.key, variant=variant_name(problem, c), status="ok",
                           timer="wall_clock", p50_ms=s, score_ms=s, template_hash="t", source=src)
            self.store.record(row)
            v = Verdict("ok", s, row.to_dict(), True, True)
            if on_verdict:
                on_verdict(i, v)
            out.append(v)
        return out


class _Oracle(guide.Guide):
    """A model that ranks neighbours by the fake's own score (the climb's mechanism, not the model's accuracy)."""

    def order(self, problem, bucket, configs):
        return sorted(configs, key=lambda c: (_Fake(None, BEST).score(problem, c), c.key))


def _search(tmp_path, start: Config, **settings):
    store = Store(tmp_path / "trials.sqlite")
    fake = _Fake(store, BEST)
    g = _Oracle(H200, seeds={(DECODE.key, 64, 8192): (start,)})
    s = SearchSettings(optuna_storage=f"sqlite:///{tmp_path / 'optuna.sqlite'}", ask_batch=3, dot_dtypes=("native",),
                       **settings)
    search = Search(fake, s, target=TARGETS["sm_90"], guide=g)
    summary = search.tune_bucket(DECODE, Bucket(64, 8192), None, None)
    return fake, summary


def test_the_local_search_climbs_from_a_wrong_seed_to_the_best_and_stops_there(tmp_path):
    start = dataclasses.replace(BEST, tiles_per_program=3, num_stages=1, store="tile")  # 4 steps and the store away
    fake, summary = _search(tmp_path, start, trials=60, climb=3, stop_at_optimum=True)
    assert summary.best["config_key"] == BEST.key
    assert summary.note.startswith("local optimum") and BEST.slug in summary.note
    assert len(fake.asked) < 60  # stopped at the optimum, long before --trials
    assert fake.asked[0] == (start, "seed:model:1")
    assert any(src.startswith("local:") for _, src in fake.asked)


def test_without_the_local_search_tpe_alone_does_not_stop_early(tmp_path):
    start = dataclasses.replace(BEST, tiles_per_program=3)
    fake, summary = _search(tmp_path, start, trials=8, climb=0, stop_at_optimum=True)
    assert not any(src.startswith("local:") for _, src in fake.asked)
    assert len({c for c, _ in fake.asked}) == 8 and not summary.note.startswith("local optimum")


def test_climb_enqueues_untried_neighbours_the_model_likes_best(tmp_path):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = OptunaSpace(DECODE, ("native",))
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'o.sqlite'}", study_name="s")
    g = guide.Guide(H200)
    bucket = Bucket(64, 8192)
    assert climb_mod.climb(study, space, DECODE, bucket, BEST, 2, TARGETS["sm_90"], guide=g) == 2
    assert climb_mod.waiting(study)
    queued = [space.config(t.system_attrs["fixed_params"]) for t in study.get_trials()]
    expected = g.order(DECODE, bucket, [c for c in neighbours(DECODE, BEST, TARGETS["sm_90"])
                                        if space.params_of(c) is not None])[:2]
    assert queued == expected
    assert {t.user_attrs["source"] for t in study.get_trials()} == {f"local:{BEST.slug}"}
    # the model's two likeliest neighbours are the neighbourhood: nothing more to queue (a local optimum)
    assert climb_mod.climb(study, space, DECODE, bucket, BEST, 2, TARGETS["sm_90"], guide=g) == 0
    assert len(climb_mod.in_study(study, space)) == 2
    # without a guide every neighbour is in it, `width` a step
    assert climb_mod.climb(study, space, DECODE, bucket, BEST, 2, TARGETS["sm_90"]) == 2


def test_eta_weights_the_buckets_left_and_is_capped_by_the_budget():
    weights = [1.0, 1.0, 2.0, 4.0]
    assert eta_s(10.0, weights, 2, None) == pytest.approx(30.0)  # 10 s for 2 units, 6 units left
    assert eta_s(10.0, weights, 2, 12.0) == pytest.approx(12.0)
    assert eta_s(0.0, weights, 0, None) is None and eta_s(0.0, weights, 0, 50.0) == 50.0


# -- multi-fidelity, on a stub worker --------------------------------------------------------

class _Reply:
    def __init__(self, data, ok=True, status="ok", detail=""):
        self.data, self.ok, self.status, self.detail = data, ok, status, detail


class _Worker:
    """Answers gates ok and timings from a table: config key -> (short p50, full p50)."""

    def __init__(self, times):
        self.times, self.requests = times, []

    def request(self, kind, payload, timeout):
        self.requests.append((kind, payload.get("fidelity", "full")))
        if kind == "gate":
            return _Reply({"rel_err": 1e-4})
        short, full = self.times[Config.from_json(payload["config"]).key]
        p50 = short if payload.get("fidelity") == "short" else full
        return _Reply({"full": {"method": "wall_clock", "p20_ms": p50, "p50_ms": p50, "p80_ms": p50, "samples": 3,
                                "floor_ms": None}})

    def prepare(self, *args):
        return _Reply({})

    def close(self):
        pass


def _evaluator(tmp_path, times) -> Evaluator:
    ctx = RunContext(run_id="r", gpu_slug="cpu", timer="wall_clock", env={k: "" for k in (
        "gpu_name", "compute_capability", "driver", "cuda", "torch", "triton")} | {"sm_count": 0},
        template_hashes={"prefill_ragged": "t"}, target=None, interpret=True, replays=10, timeout_s=5, seed=0,
        short_first=True)
    ev = Evaluator(Store(tmp_path / "trials.sqlite"), ctx, tmp_path / "src", lambda p: (2, 64))
    ev.worker = _Worker(times)
    return ev


PREFILL = Problem("prefill_ragged", "fp8", "fp8", 0, "page_blocked", 16, 32, 1, "1d")


def test_a_clear_loser_keeps_its_short_timing_and_a_contender_gets_the_full_one(tmp_path):
    problem = PREFILL
    bucket = Bucket(64, 1024)
    first, loser, close = (Config(block_t=64, tiles_per_program=t, num_warps=4, num_stages=2, block_m=4) for t in (1, 2, 4))
    ev = _evaluator(tmp_path, {first.key: (9.0, 10.0), loser.key: (12.0, 11.0), close.key: (10.4, 9.5)})
    v1 = ev._gate_and_time(problem, bucket, first, "seed")
    assert v1.row["fidelity"] == "full" and v1.score_ms == 10.0  # nothing to compare with: timed in full
    v2 = ev._gate_and_time(problem, bucket, loser, "seed")
    assert v2.row["fidelity"] == "short" and v2.score_ms == 12.0 and "cut after a short timing: 1.200x" in v2.row["reason"]
    v3 = ev._gate_and_time(problem, bucket, close, "seed")  # 10.4 <= 10.0 * PROMOTE_WITHIN: a contender
    assert 10.4 <= 10.0 * PROMOTE_WITHIN and v3.row["fidelity"] == "full" and v3.score_ms == 9.5
    assert [r for r in ev.worker.requests if r[0] == "time"] == [
        ("time", "full"), ("time", "short"), ("time", "short"), ("time", "full")]
    assert set(ev.seconds) >= {"gate", "time_short", "time_full"}


def test_small_buckets_are_timed_in_full_at_once(tmp_path):
    """Under SHORT_FIRST_FROM_MS a short timing saves nothing: every config gets the full one."""
    from tuner.evaluate import SHORT_FIRST_FROM_MS

    a, b = (Config(block_t=64, tiles_per_program=t, num_warps=4, num_stages=2, block_m=4) for t in (1, 2))
    fast = 0.5 * SHORT_FIRST_FROM_MS
    ev = _evaluator(tmp_path, {a.key: (fast, fast), b.key: (3 * fast, 3 * fast)})
    ev._gate_and_time(PREFILL, Bucket(64, 1024), a, "seed")
    v = ev._gate_and_time(PREFILL, Bucket(64, 1024), b, "seed")
    assert v.row["fidelity"] == "full" and [r for r in ev.worker.requests if r[0] == "time"] == [("time", "full")] * 2


def test_a_short_row_never_wins_emit_or_the_summary(tmp_path):
    store = Store(tmp_path / "trials.sqlite")
    problem, bucket = DECODE, Bucket(8, 4096)
    from tuner.render import template_hash

    th = template_hash("decode_paged")
    for config, score, fidelity in ((BEST, 2.0, "full"), (dataclasses.replace(BEST, num_warps=8), 1.0, "short")):
        store.record(TrialRow(trial_key=trial_key("gpu", problem, bucket, config, th, "cuda_graph"), run_id="r",
                              created_at=now_iso(), gpu_slug="gpu", family="decode_paged",
                              problem_json=problem.to_json(), problem_key=problem.key, bucket_batch=bucket.batch,
                              bucket_context=bucket.context, config_json=config.to_json(), config_key=config.key,
                              variant=variant_name(problem, config), status="ok", timer="cuda_graph", p50_ms=score,
                              score_ms=score, template_hash=th, fidelity=fidelity))
    assert [w["config_key"] for w in store.winners("gpu")] == [BEST.key]
    table, _ = build_gpu_table(store, "gpu", tmp_path / "out", EmitResult("gpu", tmp_path / "out", 0, 0))
    assert [e["variant"] for e in table["entries"]] == [variant_name(problem, BEST)]
    summary = BucketSummary(problem, bucket)
    fill_summary(summary, store, "gpu", "cuda_graph", th)
    assert summary.measured == 2 and summary.best["config_key"] == BEST.key


def test_the_template_hash_is_remembered_until_a_template_file_changes(tmp_path):
    import shutil

    from tuner.render import TEMPLATE_DIR, template_hash

    shutil.copytree(TEMPLATE_DIR, tmp_path / "t")
    before = template_hash("decode_paged", tmp_path / "t")
    assert template_hash("decode_paged", tmp_path / "t") == before == template_hash("decode_paged")
    partial = tmp_path / "t" / "_paged.py.jinja"  # a partial decode_paged includes
    partial.write_text(partial.read_text() + "\n")
    assert template_hash("decode_paged", tmp_path / "t") != before


def test_an_old_store_gains_the_fidelity_column(tmp_path):
    path = tmp_path / "old.sqlite"
    Store(path)
    con = sqlite3.connect(path)
    con.execute("alter table trials drop column fidelity")
    con.commit()
    con.close()
    assert "fidelity" in Store(path).db["trials"].columns_dict


# -- tune --engine ---------------------------------------------------------------------------

def test_the_engine_plan_is_what_an_engine_calls():
    plan = engine_plan()
    got = {(p.family, p.next_n, p.cache_dtype, p.heads, p.head_dim): len(b) for p, b in plan}
    assert got == {("decode_paged", 1, "fp8", 64, 128): 45, ("decode_paged", 2, "fp8", 64, 128): 45,
                   ("prefill_ragged", 1, "fp8", 64, 128): 4, ("prefill_paged", 1, "fp8", 64, 128): 2}
    assert all(p.lens_mode == "1d" for p, _ in plan)


@pytest.mark.parametrize("extra, option", [(["--batch", "4"], "--batch"), (["--family", "prefill_ragged"], "--family"),
                                           (["--interpret"], "--engine")])
def test_engine_refuses_the_options_it_decides(extra, option):
    result = CliRunner().invoke(main, ["tune", "--engine", *extra])
    assert result.exit_code == 2 and option in result.output, result.output


def test_a_guided_tune_under_the_interpreter_seeds_from_the_model_and_climbs(tmp_path):
    db = tmp_path / "trials.sqlite"
    args = ["tune", "--interpret", "--heads", "16", "--head-dim", "32", "--page-size", "32", "--batch", "2",
            "--context", "256", "--trials", "6", "--ask-batch", "3", "--replays", "10", "--quiet", "--db", str(db)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = Store(db).trials()
    sources = [r["source"] for r in sorted(rows, key=lambda r: r["created_at"])]
    assert {"seed:model:1", "seed:model:2", "seed:model:3"} <= set(sources)
    assert any(s.startswith("local:") for s in sources)
    assert "where the search's time went:" in result.output


def test_other_gpus_tuned_tables_seed_a_new_gpu_but_not_its_own_or_predicted_ones(tmp_path):
    import json
    import shutil

    from tuner.transfer import transfer_seeds, tuned_tables
    from indexer_logits._dispatch import TABLES_DIR

    for slug in ("nvidia_h200", "default"):
        shutil.copytree(TABLES_DIR / slug, tmp_path / slug, ignore=shutil.ignore_patterns("*.py"))
    pred = tmp_path / "some_board" / "dispatch.json"
    pred.parent.mkdir()
    table = json.loads((tmp_path / "nvidia_h200" / "dispatch.json").read_text())
    table["provenance"]["kind"] = "predicted"
    pred.write_text(json.dumps(table))
    assert tuned_tables(tmp_path, "nvidia_rtx_pro_6000") == [("nvidia_h200", tmp_path / "nvidia_h200" / "dispatch.json")]
    assert tuned_tables(tmp_path, "nvidia_h200") == []  # its own table never seeds a fresh tune
    plan = [(DECODE, [Bucket(64, 8192), Bucket(3, 4096)])]
    seeds = transfer_seeds(plan, "nvidia_rtx_pro_6000", ("native",), tmp_path)
    shipped = {(e["bucket"]["batch"], e["bucket"]["context"]): e["variant"] for e in table["entries"]
               if e["problem"] == DECODE.to_dict()}
    assert [(k[1:], c, src) for k, c, src in seeds] == [  # (3, 4096) is no bucket of that table
        ((64, 8192), Config.from_dict(table["modules"][shipped[(64, 8192)]]["config"]), "seed:transfer:nvidia_h200")]


def test_build_with_compiled_resources_reads_the_cross_compile_cache(tmp_path):
    """On a GPU the guide ranks with each point's compiled registers and shared memory (tuner.predict's
    cache, committed in db/ for the H200's fp8 decode problems: nothing compiles here)."""
    import shutil

    from tuner.predict import CompileCache

    cache_path = tmp_path / "xcompile_cache.jsonl"
    shutil.copy(Path(__file__).resolve().parent.parent / "db" / "xcompile_cache.jsonl", cache_path)
    before = cache_path.stat().st_size
    buckets = [Bucket(1, 4096), Bucket(64, 32768)]
    g = guide.build(H200, [(DECODE, buckets)], cache_path=cache_path, jobs=1)
    assert cache_path.stat().st_size == before  # every point it wanted was cached
    cache = CompileCache(cache_path)
    for b in buckets:
        seeds = g.seeds_for(DECODE, b)
        assert len(seeds) == 3
        for c in seeds:
            r = cache.get(CompileCache.key(DECODE, c, H200))
            assert r is not None and r.ok and g.resources[(DECODE.key, c.key)].registers == r.registers
