"""The report writer: JSON, markdown and PNG charts from a synthetic result list, ratios by hand."""
import json

import pytest

from bench import cases as C
from bench import report

CONV = C.by_id("conv/conv_fprop/c2_3x3_64_n32/float32")
CONV2 = C.by_id("conv/conv_fprop/c4_3x3_256_n32/float32")
LN = C.by_id("norm/layernorm_fwd/8192x4096/float32")
PEAKS = {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "hbm_tbps": 4.8}


def row(case, impl, ms, kind="reference", status="ok", math="float32"):
    r = {"case": case.id, "suite": case.suite, "op": case.op, "impl": impl, "kind": kind, "status": status,
         "reason": "" if status == "ok" else "no engine for conv_fprop yet", "flops": case.flops,
         "bytes": case.bytes, "math": math}
    if status == "ok":
        r.update(median_ms=ms, p20_ms=ms * 0.99, p80_ms=ms * 1.01, tflops=case.flops / ms / 1e9,
                 gbps=case.bytes / ms / 1e6)
    return r


def synthetic():
    rows = [row(CONV, "ncudnn", 2.0, "ncudnn"), row(CONV, "torch-nhwc", 3.0), row(CONV, "torch-nhwc-tf32", 0.5,
                                                                                math="tf32"),
            row(CONV2, "ncudnn", 4.0, "ncudnn"), row(CONV2, "torch-nhwc", 2.0),
            row(LN, "ncudnn", None, "ncudnn", status="not supported"), row(LN, "torch", 0.126)]
    return [CONV, CONV2, LN], rows


def test_summary_ratios_by_hand():
    cases, rows = synthetic()
    per_case, suites = report.summarize(cases, rows, PEAKS, 4.21)
    first = per_case[0]
    assert first["speed_vs_fair"] == pytest.approx(1.5)          # 3.0 / 2.0
    assert first["best"]["impl"] == "torch-nhwc-tf32" and first["speed_vs_best"] == pytest.approx(0.25)
    assert per_case[1]["speed_vs_fair"] == pytest.approx(0.5)
    assert suites["conv"]["geomean_speed_vs_fair"] == pytest.approx((1.5 * 0.5) ** 0.5)
    assert suites["norm"]["not_supported"] == 1 and per_case[2]["speed_vs_fair"] is None
    net = report.network_totals(per_case)["conv_fprop_n32"]
    assert net["layers"] == net["both_ran"] == 2
    # occurrences per forward: c2_3x3_64 x3, c4_3x3_256 x5
    assert net["ncudnn_ms"] == pytest.approx(3 * 2.0 + 5 * 4.0) and net["ref_ms"] == pytest.approx(3 * 3.0 + 5 * 2.0)
    # roofline: 7.40 GFLOP in 2 ms = 3.70 TFLOP/s; intensity 143.6 FLOP/B -> FP32 compute-bound at 67 TFLOP/s
    assert first["roofline_pct"] == pytest.approx(100 * CONV.flops / 2e-3 / 67e12)
    ln_ref = report.roofline_pct(rows[-1], PEAKS, 4.21)  # memory-bound: GB/s over bandwidth
    assert ln_ref == pytest.approx(100 * LN.bytes / 0.126e-3 / 4.21e12)


def test_write_json_markdown_and_rerender(tmp_path):
    cases, rows = synthetic()
    meta = {"device": "NVIDIA H200", "provenance": {"date": "2026-11-30", "command": "ncudnn bench",
                                                     "git": {"commit": "abc", "dirty": False}},
            "timing": "cuda_events(torch)"}
    md, files = report.write(tmp_path, meta, cases, rows, PEAKS, 4.21, draw=False)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert len(doc["rows"]) == len(rows) and doc["meta"]["device"] == "NVIDIA H200"
    assert doc["summary"]["conv"]["geomean_speed_vs_fair"] == pytest.approx(0.75 ** 0.5)
    text = (tmp_path / "report.md").read_text()
    assert text == md and "| c2_3x3_64_n32 (conv_fprop, float32) | 2.0000 |" in text and "1.50x" in text
    assert "not supported [1]" in text and "1. no engine for conv_fprop yet" in text
    md2, _ = report.rerender(tmp_path, draw=False)
    assert md2.split("\n")[:40] == md.split("\n")[:40]


def test_charts_are_png(tmp_path):
    pytest.importorskip("matplotlib")
    cases, rows = synthetic()
    per_case, _ = report.summarize(cases, rows, PEAKS, 4.21)
    files = report.charts(tmp_path, per_case, PEAKS, 4.21)
    assert set(files) == {"ratio_conv_fprop_n32.png", "ratio_norm.png", "roofline.png"}
    for f in files:
        data = (tmp_path / f).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_overhead_section():
    ov = {"files": {"plan_overhead-nvidia-h200.json": {"cold_process": {"build_plan_s": 0.5},
                                                        "warm_process": {"build_plan_s": 0.01},
                                                        "in_process": {"execute_torch_us": 14.0}},
                    "fe_overhead-nvidia-h200.json": {"build_cold_ms": 21.0, "execute_torch_us": 33.0}}}
    text = "\n".join(report.overhead_lines(ov))
    assert "| plan build, cold process (ms) | 500.00 | 21.00 |" in text
    assert "| execute host time with torch tensors (us) | 14.00 | 33.00 |" in text
    assert report.overhead_lines(None) == []


def test_merge_shards_and_group_geomeans(tmp_path):
    cases, rows = synthetic()
    meta = {"device": "NVIDIA H200", "provenance": {"date": "2026-11-30", "command": "ncudnn bench --shard 0/2",
                                                     "git": {"commit": "abc", "dirty": False}}, "wall_s": 5.0}
    a, b = tmp_path / "a", tmp_path / "b"
    report.write(a, meta, cases[:2], rows[:5], PEAKS, 4.21, draw=False)
    report.write(b, dict(meta, wall_s=7.0), cases[2:], rows[5:], PEAKS, 4.21, draw=False)
    md, files = report.merge([a, b], tmp_path / "m", draw=False)
    doc = json.loads((tmp_path / "m" / "results.json").read_text())
    assert len(doc["cases"]) == 3 and len(doc["rows"]) == len(rows) and doc["meta"]["wall_s"] == 7.0
    assert [s["dir"] for s in doc["meta"]["shards"]] == [str(a), str(b)]
    assert doc["summary"]["conv"]["geomean_speed_vs_fair"] == pytest.approx(0.75 ** 0.5)
    groups = report.group_geomeans(report.summarize(cases, rows)[0])
    assert groups["conv_fprop_n32"]["geomean"] == pytest.approx(0.75 ** 0.5)
    assert groups["conv_fprop_n32"]["min"] == pytest.approx(0.5) and groups["norm"]["both_ran"] == 0
    assert "| conv_fprop_n32 | 2 | 2 | 0.87x | 0.50x | 1.50x |" in md


def test_fused_cases_cover_issue_5_and_6_layers():
    fused = [c for c in C.select("conv") if c.op == "conv_fprop_bias_relu"]
    names = {(c.name, c.dtype) for c in fused}
    for layer in ("c2_3x3_64", "c3_3x3_128", "c4_3x3_256", "c5_3x3_512"):
        assert (f"{layer}_n32", "float32") in names and (f"{layer}_n128", "float32") in names
    assert ("seed_3x3_128_256_n32", "float32") in names and ("conv1_7x7_n32", "bfloat16") in names
    seed = C.by_id("conv/conv_fprop_bias_relu/seed_3x3_128_256_n32/float32")
    assert seed.params["p"] == 56 and seed.flops == 2 * 32 * 256 * 56 * 56 * 128 * 9
