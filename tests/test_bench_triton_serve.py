"""bench.triton_serve without a GPU: its plan, and the table it prints from a run's rows."""

import json

import pytest

from bench import triton_serve


def _row(version, family, batch, context, us, next_n=1, method="shipped"):
    problem = {"family": family, "next_n": next_n, "q_dtype": "fp8"}
    return {"method": method, "p50_ms": us / 1e3, "triton_version": version, "bucket_batch": batch,
            "bucket_context": context, "problem_json": json.dumps(problem)}


def test_best_of_rounds_and_ratio(tmp_path):
    rows = {"serve_3.6.0_r1": [_row("3.6.0", "prefill_ragged", 4096, 16384, 1010.0),
                               _row("3.6.0", "decode_paged", 32, 32768, 46.6, next_n=2)],
            "serve_3.6.0_r2": [_row("3.6.0", "prefill_ragged", 4096, 16384, 1000.0),
                               _row("3.6.0", "decode_paged", 32, 32768, 47.0, next_n=2, method="default")],
            "serve_3.9.0_r1": [_row("3.9.0", "prefill_ragged", 4096, 16384, 1020.0),
                               _row("3.9.0", "decode_paged", 32, 32768, 48.0, next_n=2)]}
    for name, rs in rows.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    best = triton_serve.best_times(tmp_path)
    assert best[("prefill_ragged", 4096, 16384)] == {"3.6.0": 1000.0, "3.9.0": 1020.0}
    assert best[("decode_paged n2", 32, 32768)] == {"3.6.0": 46.6, "3.9.0": 48.0}  # 'default' rows left out
    text = triton_serve.table(best, "3.6.0", ["3.9.0"])
    assert "prefill_ragged 4096x16384" in text and "1.020" in text and "1.030" in text


def test_plan_alternates_host_and_other(capsys):
    assert triton_serve.main(["--plan", "--rounds", "2", "--groups", "n2"]) == 0
    sides = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert sides == ["host", "other1", "host", "other1"]
    assert triton_serve.main(["--plan", "--rounds", "1", "--groups", "n1,n2", "--other", "a", "--other", "b"]) == 0
    sides = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert sides == ["host", "other1", "other2"] * 2  # each group under every Triton before the next


def test_bad_arguments_name_the_option(tmp_path):
    with pytest.raises(SystemExit, match="--groups"):
        triton_serve.main(["--plan", "--groups", "n3"])
    with pytest.raises(SystemExit, match="--other"):
        triton_serve.main(["--other", str(tmp_path)])
    with pytest.raises(SystemExit, match="--other"):
        triton_serve.main([])
    with pytest.raises(SystemExit, match="--rounds"):
        triton_serve.main(["--plan", "--rounds", "0"])
