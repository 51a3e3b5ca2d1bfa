"""bench/bench_ranking.py runs without a GPU and writes the JSON it promises."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_ranking_runs_and_writes_json(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_ranking
    finally:
        sys.path.remove(str(ROOT / "bench"))
    out = tmp_path / "ranking.json"
    assert bench_ranking.main(["--reps", "2", "--only", "matmul", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["case"] == "matmul_4096" and row["configs"] >= 2 and row["best"].startswith("matmul_")
    assert 0 < row["repeat_us"] < row["cold_us"] and row["calls"] > 10
    assert "cold us" in capsys.readouterr().out
