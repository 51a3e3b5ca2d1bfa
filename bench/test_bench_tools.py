"""The bench's run control and plumbing, without a GPU: results written after every case, clean stops
(--max-minutes, SIGINT / SIGTERM), the per-case tuning budget, tarballs and merging them, the
cudnn-frontend overhead graph variants, the FP16 GEMM cases.

    pytest bench/test_bench_tools.py
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench import cases as C
from bench import ncudnn_runners, report, suite
from bench.harness import Impl, Prepared

ROOT = Path(__file__).resolve().parents[1]


def _fake_setup(rng, interrupt_at=None, seen=None):
    """case_setup stand-in: one implementation computing 2*x on the host (exact), the truth 2*x in float64;
    raises KeyboardInterrupt on the case named ``interrupt_at``."""
    def setup(case, env, tune=False, references=True):
        if seen is not None:
            seen.append((case.id, tune))
        if case.id == interrupt_at:
            raise KeyboardInterrupt("test")
        x = rng.standard_normal(8)
        out = {"y": np.full(8, np.nan)}

        def fn():
            out["y"][:] = 2 * x
        impl = Impl("ncudnn", "ncudnn", lambda: Prepared(fn, lambda: out, "float32"))
        return [impl], lambda: {"y": 2 * x.astype(np.float64)}, suite._np_rel_err, out
    return setup


SIM_ENV = suite.Env(True, False, False)
SEL = C.select("all", sim=True)[:4]


def test_rows_are_handed_over_after_every_case(monkeypatch):
    rng = np.random.default_rng()
    monkeypatch.setattr(suite, "case_setup", _fake_setup(rng))
    calls = []
    rows, _ = suite.run(SEL, SIM_ENV, log=None, on_case=lambda rows, done: calls.append((done, len(rows))))
    assert [d for d, _ in calls] == [1, 2, 3, 4] and [n for _, n in calls] == [1, 2, 3, 4]
    assert all(r["status"] == "ok" and r["rel_err"]["y"] == 0.0 and r["case_wall_s"] >= 0 for r in rows)


def test_max_minutes_stops_between_cases_and_says_what_ran(monkeypatch):
    rng = np.random.default_rng()
    monkeypatch.setattr(suite, "case_setup", _fake_setup(rng))
    rows, _ = suite.run(SEL, SIM_ENV, max_minutes=0, log=None)
    assert [r["status"] for r in rows] == ["skipped"] * 4
    assert rows[0]["reason"] == "suite time budget exhausted"
    assert suite.stop_summary(rows, SEL).startswith("0 of 4 cases ran") and "4 skipped: suite time" in \
        suite.stop_summary(rows, SEL)


def test_interrupt_records_the_case_under_way_and_the_rest_as_skipped(monkeypatch):
    rng = np.random.default_rng()
    monkeypatch.setattr(suite, "case_setup", _fake_setup(rng, interrupt_at=SEL[1].id))
    rows, _ = suite.run(SEL, SIM_ENV, log=None)
    st = [(r["case"], r["status"], r.get("reason", "")) for r in rows]
    assert st[0][1] == "ok"
    assert st[1] == (SEL[1].id, "skipped", "interrupted (SIGINT / SIGTERM) while this case ran")
    assert [s[1] for s in st[2:]] == ["skipped", "skipped"] and "before this case" in st[2][2]
    assert suite.stop_summary(rows, SEL).startswith("1 of 4 cases ran")


def test_tune_budget_is_passed_per_mode(monkeypatch):
    rng = np.random.default_rng()
    seen = []
    monkeypatch.setattr(suite, "case_setup", _fake_setup(rng, seen=seen))
    suite.run(SEL[:1], SIM_ENV, tune=True, log=None)
    suite.run(SEL[:1], SIM_ENV, tune=True, log=None, tune_budget_s=2.5)
    suite.run(SEL[:1], SIM_ENV, tune=False, log=None)
    suite.run(SEL[:1], SIM_ENV, tune=True, log=None, max_minutes=0.5 / 60)   # 0.5 s left: 1 s at least
    budgets = [t for _, t in seen]
    assert budgets[:3] == [suite.TUNE_BUDGET_S["sim"], 2.5, False] and budgets[3] == 1.0


class _FakeGraph:
    """Plans 0..n-1; autotune of one index takes ``cost`` seconds and reports ``ms[i]``."""

    def __init__(self, ms, cost):
        self.ms, self.cost, self.tuned, self.selected = ms, cost, [], None

    def get_execution_plan_count(self):
        return len(self.ms)

    def autotune(self, pack, ws, handle=None, store=True, indices=None):
        assert store is False and len(indices) == 1
        (i,) = indices
        time.sleep(self.cost)
        self.tuned.append(i)
        return [(i, f"plan{i}", self.ms[i])]

    def select_plan(self, i):
        self.selected = i


def test_tune_stops_at_its_budget_and_selects_the_fastest_timed():
    g = _FakeGraph([3.0, 1.0, 2.0, 0.5, 0.1, 0.2], cost=0.05)
    detail = ncudnn_runners.tune(g, {}, None, None, "heuristic", budget_s=0.12, top=6)
    assert 2 <= len(g.tuned) <= 4 and g.tuned == list(range(len(g.tuned)))   # heuristic order, cut by time
    assert g.selected == 1 and detail.startswith("plan1 (fastest of") and "budget" in detail
    g = _FakeGraph([3.0, 1.0, 2.0, 0.5, 0.1, 0.2], cost=0.0)
    ncudnn_runners.tune(g, {}, None, None, "heuristic", budget_s=None, top=4)
    assert g.tuned == [0, 1, 2, 3] and g.selected == 3
    g = _FakeGraph([3.0, 1.0], cost=0.2)    # the first plan is timed even past the budget
    ncudnn_runners.tune(g, {}, None, None, "heuristic", budget_s=0.0)
    assert g.tuned == [0] and g.selected == 0


def _write_shard(d, cases, rows, wall):
    meta = {"device": "NVIDIA H200", "provenance": {"date": "2026-11-30", "command": f"ncudnn bench --out {d}",
                                                     "git": {"commit": "abc", "dirty": False}}, "wall_s": wall}
    report.write(d, meta, cases, rows, {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4}, 4.2, draw=False)


def _row(case, impl, ms, status="ok", kind="reference"):
    r = {"case": case.id, "suite": case.suite, "op": case.op, "impl": impl, "kind": kind, "status": status,
         "reason": "suite time budget exhausted" if status == "skipped" else "", "flops": case.flops,
         "bytes": case.bytes, "math": "float32"}
    if status == "ok":
        r.update(median_ms=ms, p20_ms=ms, p80_ms=ms, tflops=case.flops / ms / 1e9, gbps=case.bytes / ms / 1e6)
    return r


def test_pack_merge_tarballs_later_rows_win_and_charts_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from bench import pack

    a_case, b_case = C.by_id("gemm/matmul/4096x4096x4096/float32"), C.by_id("gemm/matmul/8192x8192x8192/float16")
    ms = np.random.default_rng().uniform(1, 2, 4)
    # shard a: a_case ran; b_case cut by the budget. shard b (a re-run): b_case ran, a_case's ncudnn re-timed
    _write_shard(tmp_path / "a", [a_case, b_case], [_row(a_case, "ncudnn", ms[0], kind="ncudnn"),
                                                    _row(a_case, "cublas", ms[1]),
                                                    _row(b_case, "ncudnn", None, "skipped", "ncudnn")], 5.0)
    _write_shard(tmp_path / "b", [b_case, a_case], [_row(b_case, "ncudnn", ms[2], kind="ncudnn"),
                                                    _row(b_case, "cublas", ms[3]),
                                                    _row(a_case, "ncudnn", None, "skipped", "ncudnn")], 9.0)
    tgz_a = pack.pack(tmp_path / "a")
    tgz_b = pack.pack(tmp_path / "b", tmp_path / "other.tgz")
    assert tgz_a == tmp_path / "a.tgz" and tgz_b.exists()
    back = pack.results_dir(tgz_a)
    assert json.loads((back / "results.json").read_text())["meta"]["wall_s"] == 5.0
    md, files = report.merge([tgz_a, tgz_b], tmp_path / "m", draw=True)
    doc = json.loads((tmp_path / "m" / "results.json").read_text())
    rows = {(r["case"], r["impl"]): r for r in doc["rows"]}
    assert len(doc["rows"]) == 4 and all(r["status"] == "ok" for r in rows.values())
    assert rows[(a_case.id, "ncudnn")]["median_ms"] == ms[0]    # a later "skipped" does not replace a run
    assert rows[(b_case.id, "ncudnn")]["median_ms"] == ms[2]    # a later run replaces "skipped"
    assert doc["meta"]["wall_s"] == 9.0 and len(doc["meta"]["shards"]) == 2
    assert doc["meta"]["stopped"].startswith("merged from 2: 2 of 2 cases ran")
    pngs = [f for f in files if f.endswith(".png")]
    assert "roofline.png" in pngs and any(f.startswith("ratio_gemm") for f in pngs)
    for f in pngs:
        assert (tmp_path / "m" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"{ms[1] / ms[0]:.2f}x" in md


def test_unpack_keeps_members_inside(tmp_path):
    import io
    import tarfile

    from bench import pack

    tgz = tmp_path / "evil.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        for name in ("ok/results.json", "../escape.txt"):
            data = b"{}"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    dest = pack.unpack(tgz, tmp_path / "x")
    assert (dest / "ok" / "results.json").exists() and not (tmp_path / "escape.txt").exists()


def test_cli_writes_results_after_every_case_and_packs(tmp_path, monkeypatch, capsys):
    """`ncudnn bench --sim` on two simulator cases: results.json exists (partial) after the first case, the
    final one has both, the tarball holds it."""
    from ncudnn import bench_cli

    out = tmp_path / "run"
    snapshots = []
    orig = report.write

    def spy(out_dir, meta, cases, rows, *a, **k):
        res = orig(out_dir, meta, cases, rows, *a, **k)
        snapshots.append(json.loads((Path(out_dir) / "results.json").read_text()))
        return res
    monkeypatch.setattr(report, "write", spy)
    rc = bench_cli.main(["--sim", "--filter", "pointwise/relu/256,reduce/reduce_amax", "--out", str(out),
                         "--no-charts", "--pack"])
    assert rc == 0
    assert len(snapshots) == 3
    first, final = snapshots[0], snapshots[-1]
    assert first["meta"]["progress"].startswith("1 of 2") and len(first["cases"]) == 1
    assert "progress" not in final["meta"] and final["meta"]["stopped"].startswith("2 of 2 cases ran")
    assert {r["status"] for r in final["rows"]} == {"ok"} and len(final["rows"]) == 2
    assert (tmp_path / "run.tgz").exists() and "packed" in capsys.readouterr().out


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM")
def test_sigterm_stops_cleanly_and_keeps_what_ran(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-m", "ncudnn", "bench", "--sim", "--suite", "reduce", "--out", str(out),
                          "--no-charts"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    t0 = time.time()
    while not (out / "results.json").exists() and time.time() - t0 < 120 and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before a signal could be sent"
    p.send_signal(signal.SIGTERM)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 0, text[-2000:]
    doc = json.loads((out / "results.json").read_text())
    st = [r["status"] for r in doc["rows"]]
    assert st[0] == "ok" and "skipped" in st and "interrupted" in doc["meta"]["stopped"], doc["meta"]["stopped"]


def test_fe_overhead_graph_variants_build_in_ncudnn():
    """The variants fe_overhead.py offers cuDNN are valid pygraphs (ncudnn plans them too: the
    same-graph column); without torch the script says so and exits 0."""
    import ncudnn

    from bench import fe_overhead as F

    h = ncudnn.create_handle()
    names = []
    for v in F.VARIANTS:
        g, ins, out, _ = F.build_graph(ncudnn, h, v)
        assert g.get_execution_plan_count() >= 1
        names.append(v[0])
    assert names[-1] == "conv_bias_relu_nhwc" and names[0] == "pointwise_nhwc"
    try:
        import torch  # noqa: F401
    except ImportError:
        assert F.main(["--print-only"]) == 0


def test_fp16_gemm_cases():
    ids = {c.id: c for c in C.select("gemm")}
    h4, h8 = ids["gemm/matmul/4096x4096x4096/float16"], ids["gemm/matmul/8192x8192x8192/float16"]
    assert h8.quick and not h4.quick and h8 in C.select("gemm", quick=True)
    assert h8.flops == 2 * 8192 ** 3 and h8.bytes == 2 * 3 * 8192 ** 2
    assert report.fair_ref("gemm", h8) == "cublas" and report.group_of(h8) == "gemm_float16"
    assert suite.impl_names(h8) == ["ncudnn", "cublas", "cudnn-fe"]


def test_top_level_cli_forwards_every_bench_option():
    from ncudnn import cli
    from ncudnn.bench_cli import build_parser

    argv = ["--suite", "gemm", "--quick", "--tune", "--tune-budget", "7.5", "--max-minutes", "3", "--filter",
            "float16,!4096", "--out", "o", "--pack", "--no-charts", "--shard", "0/2"]
    ns = cli.build_parser().parse_args(["bench", *argv])
    from ncudnn.bench_cli import argv_of

    again = build_parser().parse_args(argv_of(ns))
    assert vars(again) == vars(build_parser().parse_args(argv))
    assert again.tune_budget == 7.5 and again.pack == "" and again.filter == "float16,!4096"
    ns = cli.build_parser().parse_args(["bench", "--merge", "a.tgz", "b", "--out", "m", "--pack", "m.tgz"])
    again = build_parser().parse_args(argv_of(ns))
    assert again.merge == ["a.tgz", "b"] and again.pack == "m.tgz" and again.out == "m"
