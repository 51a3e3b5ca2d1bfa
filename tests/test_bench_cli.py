"""`ncudnn bench` without a GPU: says what is missing and exits 0; --list; --sim runs the harness for real."""
import json

import pytest

from ncudnn import cli
from ncudnn.testing import SIM

pytestmark = pytest.mark.skipif(not SIM, reason="the no-GPU behaviour; on a GPU the suite itself runs")


def test_no_gpu_benchmarks_nothing(capsys):
    assert cli.main(["bench"]) == 0
    out = capsys.readouterr().out
    assert "missing here: a GPU" in out and "nothing was benchmarked" in out


def test_list(capsys):
    assert cli.main(["bench", "--suite", "gemm", "--list"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "18 cases" and out[0].startswith("gemm/matmul/1024x1024x1024/float32")


def test_sim_smoke_pointwise(tmp_path, capsys):
    """The whole path on the simulator: graph, plan, NaN-poisoned outputs, float64 oracle, timing, report."""
    assert cli.main(["bench", "--sim", "--suite", "pointwise", "--out", str(tmp_path), "--no-charts"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {r["case"]: r for r in doc["rows"]}
    assert len(rows) == 2
    for r in rows.values():
        assert r["status"] == "ok", r
        assert r["rel_err"]["y"] <= r["tol"] and r["clock"] == "wall_clock(simulator)"
    assert doc["meta"]["provenance"]["versions"]["ncudnn"]
    assert "| pointwise | 2 | 2 |" in capsys.readouterr().out
