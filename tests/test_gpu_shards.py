"""tools/gpu_tests.sh's sharding: tools/order_tests.py splits a long file into FILE@I/N lines, and the
conftest's NCUDNN_SHARD=I/N makes the N processes of one file run each of its tests exactly once."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = "tests/test_memory.py"


def order(tmp_path, env):
    (tmp_path / ".gpustate").mkdir(exist_ok=True)
    (tmp_path / ".gpustate" / "times.txt").write_text(f"950.0 {TARGET}::a\n5.0 tests/test_log.py::b\n")
    for f in (TARGET, "tests/test_log.py"):
        os.makedirs(tmp_path / os.path.dirname(f), exist_ok=True)
        (tmp_path / f).write_text("")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "order_tests.py"), "tests"], cwd=tmp_path,
                         env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_long_file_is_split_by_its_known_time(tmp_path):
    assert order(tmp_path, {"SPLIT_S": "400"}) == [f"{TARGET}@{i}/3" for i in range(3)] + ["tests/test_log.py"]
    assert order(tmp_path, {"SPLIT_S": "0"}) == [TARGET, "tests/test_log.py"]
    assert order(tmp_path, {"SPLIT_S": "0", "SHARDS": "2"}) == [f"{TARGET}@0/2", f"{TARGET}@1/2",
                                                                "tests/test_log.py@0/2", "tests/test_log.py@1/2"]


def collected(shard):
    env = {k: v for k, v in os.environ.items() if k not in ("NCUDNN_DONE_FILE", "NCUDNN_SHARD")}
    if shard:
        env["NCUDNN_SHARD"] = shard
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", TARGET],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "::" in ln]


@pytest.mark.parametrize("n", [1, 3])
def test_shards_partition_a_file(n):
    whole = collected(None)
    parts = [collected(f"{i}/{n}") for i in range(n)]
    assert len(whole) > 10
    assert sorted(sum(parts, [])) == sorted(whole)
    assert all(abs(len(p) - len(whole) / n) <= 1 for p in parts)
