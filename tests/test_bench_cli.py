"""`ncudnn bench` without a GPU: says what is missing and exits 1 (nothing benchmarked); --list; --sim runs the
harness for real; results go under the current directory (or --out), never into the package; a run that
benchmarked nothing it was asked to exits non-zero."""
import json
import re
from pathlib import Path

import pytest

from ncudnn import cli
from ncudnn.testing import SIM

pytestmark = pytest.mark.skipif(not SIM, reason="the no-GPU behaviour; on a GPU the suite itself runs")


def test_no_gpu_benchmarks_nothing(capsys):
    assert cli.main(["bench"]) == 1
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


ROOT = Path(__file__).resolve().parents[1]


def _tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")) if d.exists() else []


def test_default_out_is_under_the_current_directory(tmp_path, monkeypatch, capsys):
    """No --out: bench-results/<device>/<date>-sim-<suite>/ under the working directory; nothing is written
    beside the package (its bench/results or anywhere under ncudnn/)."""
    monkeypatch.chdir(tmp_path)
    before = _tree(ROOT / "bench" / "results"), _tree(ROOT / "ncudnn")
    assert cli.main(["bench", "--sim", "--suite", "pointwise", "--filter", "relu", "--no-charts"]) == 0
    runs = list((tmp_path / "bench-results" / "simulator").iterdir())
    assert len(runs) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d-sim-pointwise", runs[0].name), runs
    doc = json.loads((runs[0] / "results.json").read_text())
    assert {r["case"] for r in doc["rows"]} and all("relu" in r["case"] for r in doc["rows"])
    assert (runs[0] / "report.md").exists()
    after = _tree(ROOT / "bench" / "results"), _tree(ROOT / "ncudnn")
    assert [p for p in after[0] if p not in before[0]] == []
    assert [p for p in after[1] if p not in before[1] and "__pycache__" not in p] == []
    assert str(runs[0]) in capsys.readouterr().out


def test_a_filter_that_selects_nothing_exits_1(tmp_path, capsys):
    assert cli.main(["bench", "--sim", "--filter", "no-such-case", "--out", str(tmp_path / "r")]) == 1
    assert "no case selected" in capsys.readouterr().out
    assert not (tmp_path / "r").exists()
    assert cli.main(["bench", "--suite", "gemm", "--filter", "no-such-case", "--list"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "0 cases"


def test_a_run_where_no_ncudnn_row_was_measured_exits_1(tmp_path, monkeypatch, capsys):
    """Every case skipped (or refused): the report is still written, and the exit status says nothing ran."""
    from ncudnn import bench_cli

    bench_cli._bench()
    from bench import suite

    def nothing_runs(sel, env, *a, **k):
        return [dict(suite.skipped_row(c, "refused here"), status=st)
                for c, st in zip(sel, ("skipped", "not supported"))], None

    monkeypatch.setattr(suite, "run", nothing_runs)
    assert cli.main(["bench", "--sim", "--suite", "pointwise", "--out", str(tmp_path), "--no-charts"]) == 1
    assert "no ncudnn row was measured" in capsys.readouterr().out
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["status"] for r in doc["rows"]] == ["skipped", "not supported"]


def test_measured_counts_only_timed_ncudnn_rows():
    from ncudnn.bench_cli import measured

    rows = [{"kind": "reference", "status": "ok"}, {"kind": "ncudnn", "status": "wrong"},
            {"kind": "ncudnn", "status": "error"}, {"kind": "ncudnn", "status": "not supported"}]
    assert measured(rows) == []
    assert measured(rows + [{"kind": "ncudnn", "status": "not checked"}]) == [{"kind": "ncudnn", "status": "not checked"}]


def test_no_bench_directory_exits_1(monkeypatch, capsys):
    from ncudnn import bench_cli

    monkeypatch.setattr(bench_cli, "_bench", lambda: None)
    assert cli.main(["bench", "--sim"]) == 1
    assert "Nothing benchmarked" in capsys.readouterr().out


def test_overhead_results_land_in_the_run_folder(tmp_path, monkeypatch):
    """--overhead's scripts are told the run's folder (NCUDNN_BENCH_OUT) and their JSON is read from there."""
    import subprocess

    from ncudnn import bench_cli

    seen = []

    def fake_run(cmd, env=None, **kw):
        seen.append(env["NCUDNN_BENCH_OUT"])
        name = Path(cmd[-1]).stem.replace("bench_", "")
        Path(env["NCUDNN_BENCH_OUT"], f"{name}-dev.json").write_text(json.dumps({"script": name}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bench_cli.subprocess, "run", fake_run)
    res = bench_cli._overhead(tmp_path, None)
    assert seen == [str(tmp_path.resolve())] * 2
    assert res["files"] == {"plan_overhead-dev.json": {"script": "plan_overhead"},
                            "fe_overhead-dev.json": {"script": "fe_overhead"}}
    assert json.loads((tmp_path / "overhead.json").read_text())["files"] == res["files"]
