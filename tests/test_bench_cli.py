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
    assert out[-1] == "26 cases" and out[0].startswith("gemm/matmul/1024x1024x1024/float32")


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


def test_pytest_benchmark_suite_sim(tmp_path):
    """bench/ under pytest-benchmark: the simulator cases run, the CUDA-event-style figures land in extra_info."""
    pytest.importorskip("pytest_benchmark")
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "pb.json"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "bench/", "--bench-sim",
                        "--bench-suite", "pointwise", f"--benchmark-json={out}"], cwd=root, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out.read_text())
    infos = [b["extra_info"] for b in doc["benchmarks"]]
    assert len(infos) == 2 and all(i["status"] == "ok" and i["rel_err"]["y"] <= i["tol"] for i in infos)
