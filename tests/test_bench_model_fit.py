"""bench/model_fit.py: the model's top-1 regret on the committed H200 trial store (the figure
tuner.model's docstring cites), per-bucket rows, and its refusals. No GPU."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench import model_fit

ROOT = Path(__file__).resolve().parent.parent
DB = ROOT / "db" / "trials.sqlite"


@pytest.mark.skipif(not DB.is_file(), reason="no committed trial store")
def test_the_fit_on_the_committed_h200_store(capsys):
    assert model_fit.main(["--verbose"]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("all: 102 buckets, geo-mean regret ")
    assert float(last.split("geo-mean regret ")[1].split(",")[0]) < 1.10  # docstring: 1.035
    assert "fp8_pg64_h64_d128_n2" in out and "regret" in out.splitlines()[0]


@pytest.mark.skipif(not DB.is_file(), reason="no committed trial store")
def test_the_prefill_fit(capsys):
    """Model 9's prefill terms on the store's 6 prefill buckets (tuner/model.py: 1.018, worst 1.06)."""
    assert model_fit.main(["--family", "prefill"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("all: 6 buckets, geo-mean regret ")
    assert float(last.split("geo-mean regret ")[1].split(",")[0]) < 1.03


def test_geo_mean_and_refusals(tmp_path):
    assert model_fit.geo_mean([1.0, 4.0]) == pytest.approx(2.0)
    proc = subprocess.run([sys.executable, "-m", "bench.model_fit", "--db", str(tmp_path / "none.sqlite")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "no trial store" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "bench.model_fit", "--gpu", "h300"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "gpu: expected one of" in proc.stderr
