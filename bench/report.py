"""The report of a run: raw JSON, a markdown table, PNG charts -- all from the list of result rows.

Definitions used in the table (also written at the top of ``report.md``):

* **speed vs ref** = reference median time / ncudnn median time (> 1: ncudnn is faster).
* **fair ref** per suite (:data:`FAIR_REF`): the reference doing the same arithmetic on the same layout --
  conv: ``torch-nhwc`` (cuDNN, FP32 with TF32 off, channels-last, as ncudnn); GEMM: ``cublas`` (TF32
  off); attention: ``torch-sdpa-cudnn``; the memory-bound suites: ``torch``. **best ref**: the fastest
  correct reference of any kind (TF32, NCHW, cudnn-frontend included).
* **% of roofline** = achieved FLOP/s / min(peak FLOP/s of the precision computed in,
  intensity x memory bandwidth); bandwidth is the copy bandwidth measured in the same run when torch
  is present (else the datasheet's), the compute peaks are the datasheet's (:data:`bench.env.SPEC_PEAKS`).

:func:`write` makes ``results.json``, ``report.md``, ``ratio_<group>.png`` and ``roofline.png``
(charts need matplotlib; without it the report says so). :func:`rerender` rebuilds them from a
``results.json`` (e.g. here, from a run on a machine without matplotlib).
"""
import json
from pathlib import Path

from .cases import geomean

FAIR_REF = {"conv": "torch-nhwc", "gemm": "cublas", "attention": "torch-sdpa-cudnn"}
OK = ("ok", "not checked")


def fair_ref(suite, case=None):
    """The fair reference's name: per suite; a TF32 GEMM case compares with cuBLAS TF32."""
    if case is not None and case.suite == "gemm" and case.params.get("tf32"):
        return "cublas-tf32"
    return FAIR_REF.get(suite, "torch")


def group_of(case):
    """Chart / network group: conv cases by pass and batch ("conv_fprop_n32"), others by suite."""
    if case.suite == "conv":
        dt = "" if case.dtype == "float32" else f"_{case.dtype}"
        return f"{case.op}_{case.name.rsplit('_', 1)[-1]}{dt}"
    if case.suite == "gemm":   # FP32 (FMA), TF32 and BF16 GEMMs are different races
        return f"gemm_{'tf32' if case.params.get('tf32') else case.dtype}"
    return case.suite


def network_totals(per_case):
    """ResNet-50 time per pass and batch: sum over layers of occurrences x median, ncudnn and fair ref
    (the total only when every layer of the group ran on both sides)."""
    out = {}
    for p in per_case:
        if p["suite"] != "conv" or p["op"] == "conv_fprop_bias_relu":
            continue  # the fused set is a layer sample, not a network: see group_geomeans
        t = out.setdefault(p["group"], {"layers": 0, "both_ran": 0, "ncudnn_ms": 0.0, "ref_ms": 0.0})
        t["layers"] += 1
        if _ok(p["ncudnn"]) and _ok(p["fair"]):
            t["both_ran"] += 1
            t["ncudnn_ms"] += p["count"] * p["ncudnn"]["median_ms"]
            t["ref_ms"] += p["count"] * p["fair"]["median_ms"]
    for t in out.values():
        complete = t["both_ran"] == t["layers"]
        t["speed"] = t["ref_ms"] / t["ncudnn_ms"] if complete and t["ncudnn_ms"] else None
        if not complete:
            t["ncudnn_ms"] = t["ref_ms"] = None
    return out


def group_geomeans(per_case):
    """Per group (pass, batch, dtype; suites elsewhere): cases, geomean speed vs fair ref, min and max."""
    out = {}
    for p in per_case:
        g = out.setdefault(p["group"], {"cases": 0, "speeds": []})
        g["cases"] += 1
        if p["speed_vs_fair"] is not None:
            g["speeds"].append(p["speed_vs_fair"])
    for g in out.values():
        s = g.pop("speeds")
        g.update(both_ran=len(s), geomean=geomean(s) if s else None, min=min(s) if s else None,
                 max=max(s) if s else None)
    return out


def _ok(row):
    return row is not None and row.get("status") in OK and row.get("median_ms")


def peak_for(peaks, math):
    if not peaks:
        return None
    return peaks.get(math) or peaks.get("float32")


def roofline_pct(row, peaks, bw_tbps):
    """Achieved / attainable performance, percent (None without peaks)."""
    if not _ok(row) or not peaks or not bw_tbps or not row.get("bytes"):
        return None
    achieved = row["flops"] / (row["median_ms"] * 1e-3)
    ai = row["flops"] / row["bytes"]
    peak = peak_for(peaks, row.get("math", "float32")) * 1e12
    attainable = min(peak, ai * bw_tbps * 1e12)
    return 100.0 * achieved / attainable if attainable else None


def summarize(cases, rows, peaks=None, bw_tbps=None):
    """Per case: ncudnn, tuned, fair and best reference rows and ratios; per suite: geomeans."""
    by = {}
    for r in rows:
        by.setdefault(r["case"], {})[r["impl"]] = r
    per_case = []
    for c in cases:
        impls = by.get(c.id, {})
        nc, tuned = impls.get("ncudnn"), impls.get("ncudnn-tuned")
        fair = impls.get(fair_ref(c.suite, c))
        refs = [r for r in impls.values() if r["kind"] == "reference" and _ok(r)]
        best = min(refs, key=lambda r: r["median_ms"]) if refs else None
        mine = min([r for r in (nc, tuned) if _ok(r)], key=lambda r: r["median_ms"], default=None)
        per_case.append({
            "case": c.id, "suite": c.suite, "name": c.name, "op": c.op, "intensity": c.intensity,
            "group": group_of(c), "count": c.count,
            "ncudnn": nc, "tuned": tuned, "fair": fair, "best": best,
            "speed_vs_fair": fair["median_ms"] / nc["median_ms"] if _ok(nc) and _ok(fair) else None,
            "speed_vs_best": best["median_ms"] / mine["median_ms"] if mine and best else None,
            "roofline_pct": roofline_pct(mine, peaks, bw_tbps) if mine else None,
            "fair_roofline_pct": roofline_pct(fair, peaks, bw_tbps),
        })
    suites = {}
    for s in dict.fromkeys(c.suite for c in cases):
        pc = [p for p in per_case if p["suite"] == s]
        suites[s] = {
            "cases": len(pc),
            "ncudnn_ok": sum(1 for p in pc if _ok(p["ncudnn"])),
            "not_supported": sum(1 for p in pc if p["ncudnn"] and p["ncudnn"]["status"] == "not supported"),
            "wrong_or_error": sum(1 for p in pc if p["ncudnn"] and p["ncudnn"]["status"] in ("wrong", "error")),
            "geomean_speed_vs_fair": geomean([p["speed_vs_fair"] for p in pc]),
            "geomean_speed_vs_best": geomean([p["speed_vs_best"] for p in pc]),
        }
    return per_case, suites


# ------------------------------------------------------------------------------ markdown

def _ms(row):
    if row is None:
        return "—"
    if _ok(row):
        return f"{row['median_ms']:.4f}" + ("*" if row["status"] == "not checked" else "")
    return row["status"]


def _x(v):
    return "—" if v is None else f"{v:.2f}x"


def _rate(row, suite):
    if not _ok(row):
        return "—"
    if suite in ("conv", "gemm", "attention"):
        return f"{row['tflops']:.1f} TFLOP/s"
    return f"{row['gbps']:.0f} GB/s"


def markdown(meta, cases, rows, peaks=None, bw_tbps=None):
    per_case, suites = summarize(cases, rows, peaks, bw_tbps)
    dev = meta.get("device", "?")
    git = meta.get("provenance", {}).get("git", {})
    lines = [f"# ncudnn benchmarks on {dev}", "",
             f"{meta.get('provenance', {}).get('date', '')}; commit {git.get('commit') or '?'}"
             f"{' (dirty)' if git.get('dirty') else ''}; command `{meta.get('provenance', {}).get('command', '')}`",
             "", f"Timing: {meta.get('timing', '')}", "",
             *([f"**Partial results: {meta['progress']}.**", ""] if meta.get("progress") else []),
             *([f"Run: {meta['stopped']}.", ""] if meta.get("stopped") else []),
             "speed = reference median / ncudnn median (> 1: ncudnn faster). fair ref: same arithmetic and layout "
             "(conv: cuDNN FP32 TF32-off NHWC via torch; GEMM: cuBLAS TF32-off; others: torch). best ref: fastest "
             "correct reference of any kind (TF32, NCHW, cudnn-frontend included). % roofline: ncudnn's best "
             f"time against min(peak, intensity x bandwidth); bandwidth {bw_tbps or '?'} TB/s"
             f"{' (measured copy)' if meta.get('bw_measured') else ''}.", "",
             "A time marked * was not checked against a float64 result (no torch, and the NumPy oracle too slow "
             "at that size).", "",
             "## Summary (geometric means over cases both sides ran)", "",
             "| suite | cases | ncudnn ran | not supported | wrong/error | speed vs fair ref | speed vs best ref |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s, v in suites.items():
        lines.append(f"| {s} | {v['cases']} | {v['ncudnn_ok']} | {v['not_supported']} | {v['wrong_or_error']} | "
                     f"{_x(_nan_none(v['geomean_speed_vs_fair']))} | {_x(_nan_none(v['geomean_speed_vs_best']))} |")
    net = network_totals(per_case)
    if net:
        lines += ["", "## ResNet-50 convolutions per iteration (sum over layers of occurrences x median)", "",
                  "| pass, batch | layers both ran | ncudnn ms | cuDNN (torch-nhwc) ms | speed |",
                  "| --- | --- | --- | --- | --- |"]
        for k, t in net.items():
            nm = "—" if t["ncudnn_ms"] is None else f"{t['ncudnn_ms']:.3f}"
            rm = "—" if t["ref_ms"] is None else f"{t['ref_ms']:.3f}"
            lines.append(f"| {k} | {t['both_ran']} / {t['layers']} | {nm} | {rm} | {_x(t['speed'])} |")
    groups = group_geomeans(per_case)
    if groups:
        lines += ["", "## Geomean speed vs fair ref per group (pass, batch, dtype)", "",
                  "| group | cases | both ran | geomean | min | max |", "| --- | --- | --- | --- | --- | --- |"]
        for k, g in groups.items():
            lines.append(f"| {k} | {g['cases']} | {g['both_ran']} | {_x(_nan_none(g['geomean']))} | {_x(g['min'])} | "
                         f"{_x(g['max'])} |")
    reasons = {}
    for s in suites:
        lines += ["", f"## {s}", "",
                  "| case | ncudnn ms | tuned ms | fair ref ms | speed vs fair | best ref | best ms | speed vs best | "
                  "ncudnn rate | % roofline |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in (p for p in per_case if p["suite"] == s):
            nc = p["ncudnn"]
            cell = _ms(nc)
            if nc is not None and not _ok(nc):
                key = nc["reason"][:320]
                reasons.setdefault(key, len(reasons) + 1)
                cell = f"{nc['status']} [{reasons[key]}]"
            best = p["best"]
            pct = "—" if p["roofline_pct"] is None else f"{p['roofline_pct']:.0f}%"
            lines.append(f"| {p['name']} ({p['op']}, {p['case'].rsplit('/', 1)[-1]}) | {cell} | {_ms(p['tuned'])} | "
                         f"{_ms(p['fair'])} | {_x(p['speed_vs_fair'])} | {best['impl'] if best else '—'} | "
                         f"{_ms(best)} | {_x(p['speed_vs_best'])} | {_rate(nc, s)} | {pct} |")
    lines += overhead_lines(meta.get("overhead"))
    if reasons:
        lines += ["", "## Why ncudnn did not run a case", ""]
        lines += [f"{i}. {r}" for r, i in reasons.items()]
    return "\n".join(lines) + "\n", per_case, suites


def overhead_lines(ov):
    """The host-overhead section: ncudnn (bench_plan_overhead.py) beside cudnn-frontend (fe_overhead.py),
    and ncudnn on the graph variant cudnn-frontend ran (fe_overhead.py's ``ncudnn_same_graph``)."""
    files = (ov or {}).get("files") or {}
    nc = next((v for k, v in files.items() if k.startswith("plan_overhead")), None)
    fe = next((v for k, v in files.items() if k.startswith("fe_overhead")), None)
    if not nc and not fe:
        return []

    def g(d, *path, scale=1.0):
        for p in path:
            d = d.get(p) if isinstance(d, dict) else None
        return "—" if not isinstance(d, (int, float)) else f"{d * scale:.2f}"
    fe_warm = g(fe, "build_warm_kernel_cache_ms")
    fe_warm = g(fe, "build_warm_ms") if fe_warm == "—" else fe_warm
    same = (fe or {}).get("ncudnn_same_graph") or {}
    variant = (fe or {}).get("variant")
    lines = ["", "## Host overhead (one small plan, tiny tensors)", "",
             f"cudnn-frontend graph: {variant or 'none built'}"
             + (f" (attempts: {'; '.join(a['variant'] + ': ' + a.get('error', 'ok') for a in fe['attempts'])})"
                if fe and fe.get("attempts") else ""), "",
             "| what | ncudnn (pointwise plan) | cudnn-frontend | ncudnn, cudnn-frontend's graph |",
             "| --- | --- | --- | --- |",
             f"| plan build, cold process (ms) | {g(nc, 'cold_process', 'build_plan_s', scale=1e3)} | "
             f"{g(fe, 'build_cold_ms')} | {g(same, 'build_first_ms')} (first in process) |",
             f"| plan build, warm (ms; ncudnn: cubin from disk, fe: kernel cache, else a second build) | "
             f"{g(nc, 'warm_process', 'build_plan_s', scale=1e3)} | {fe_warm} | {g(same, 'build_again_ms')} |",
             f"| execute host time with torch tensors (us) | {g(nc, 'in_process', 'execute_torch_us')} | "
             f"{g(fe, 'execute_torch_us')} | {g(same, 'execute_torch_us')} |",
             f"| one torch op, same measure (us) | {g(nc, 'in_process', 'ref_torch_add_us')} | "
             f"{g(fe, 'ref_torch_add_us')} | |"]
    if fe and fe.get("kernel_cache_error"):
        lines += ["", f"cudnn-frontend kernel cache: {fe['kernel_cache_error']}"]
    if same.get("error"):
        lines += ["", f"ncudnn on that graph: {same['error']}"]
    return lines


def _nan_none(v):
    return None if v is None or v != v else v


# ------------------------------------------------------------------------------ charts

def charts(out_dir, per_case, peaks, bw_tbps):
    """ratio_<group>.png (speed vs fair ref per case; groups: see :func:`group_of`) and roofline.png;
    returns the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out_dir = Path(out_dir)
    files = []
    for grp in dict.fromkeys(p["group"] for p in per_case):
        pc = [p for p in per_case if p["group"] == grp]
        s = pc[0]["suite"]
        ref = "cublas-tf32" if grp == "gemm_tf32" else fair_ref(s)
        fig, ax = plt.subplots(figsize=(max(6, 0.32 * len(pc) + 2), 4.5))
        xs = list(range(len(pc)))
        vals = [p["speed_vs_fair"] if p["speed_vs_fair"] else float("nan") for p in pc]
        ax.bar(xs, vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
        for x, p in zip(xs, pc):
            if p["speed_vs_fair"] is None:
                ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=6,
                        transform=ax.get_xaxis_transform())
        ax.axhline(1.0, color="black", lw=0.8)
        if any(v == v for v in vals):
            ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{p['name']} {p['op'].replace('conv_', '')}" for p in pc], rotation=90, fontsize=6)
        ax.set_ylabel(f"speed vs {ref} (ref time / ncudnn time)")
        ax.set_title(f"ncudnn vs {ref}: {grp}")
        fig.tight_layout()
        f = out_dir / f"ratio_{grp}.png"
        fig.savefig(f, dpi=120)
        plt.close(fig)
        files.append(f.name)
    fig, ax = plt.subplots(figsize=(7, 5))
    pts = {"ncudnn": [], "fair ref": []}
    for p in per_case:
        for label, row in (("ncudnn", p["ncudnn"]), ("fair ref", p["fair"])):
            if _ok(row) and row.get("bytes"):
                pts[label].append((row["flops"] / row["bytes"], row["tflops"]))
    for label, marker in (("ncudnn", "o"), ("fair ref", "x")):
        if pts[label]:
            ax.scatter(*zip(*pts[label]), marker=marker, label=label, s=18)
    if peaks and bw_tbps:
        import numpy as np

        ai = np.logspace(-2, 4, 200)
        for math_, style in (("float32", "-"), ("tf32", "--"), ("bfloat16", ":")):
            ax.plot(ai, np.minimum(peaks[math_], ai * bw_tbps), style, color="gray", lw=1,
                    label=f"roof {math_} ({peaks[math_]:.0f} TFLOP/s, {bw_tbps:.2f} TB/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("roofline")
    ax.legend(fontsize=7)
    fig.tight_layout()
    f = out_dir / "roofline.png"
    fig.savefig(f, dpi=120)
    plt.close(fig)
    files.append(f.name)
    return files


# ------------------------------------------------------------------------------ write

def write(out_dir, meta, cases, rows, peaks=None, bw_tbps=None, draw=True):
    """results.json + report.md + charts (unless not ``draw``) into ``out_dir``; returns (markdown, files)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md, per_case, suites = markdown(meta, cases, rows, peaks, bw_tbps)
    files = charts(out_dir, per_case, peaks, bw_tbps) if draw else []
    if draw and not files:
        md += "\n(charts not drawn: matplotlib is not installed here; `ncudnn bench --report DIR` redraws them)\n"
    else:
        md += "\n" + "\n".join(f"![{f}]({f})" for f in files) + "\n"
    doc = {"meta": meta, "peaks": peaks, "bandwidth_tbps": bw_tbps, "cases": [c.to_json() for c in cases],
           "resnet50": network_totals(per_case),
           "rows": rows, "summary": {s: {k: _nan_none(v) if isinstance(v, float) else v for k, v in d.items()}
                                     for s, d in suites.items()}}
    _atomic_write(out_dir / "results.json", json.dumps(doc, indent=1, default=str))
    _atomic_write(out_dir / "report.md", md)
    return md, ["results.json", "report.md"] + files


def _atomic_write(path, text):
    """Write to a temporary name, then rename: a run killed mid-write leaves the previous file whole."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text)
    tmp.replace(path)


def rerender(out_dir, draw=True):
    """Rebuild report.md and the charts of ``out_dir`` from its results.json."""
    from .cases import Case

    doc = json.loads((Path(out_dir) / "results.json").read_text())
    cases = [Case(c["suite"], c["op"], c["name"], c["params"], c["dtype"], c["layout"], c["flops"], c["bytes"],
                  c["quick"], c["source"], c.get("count", 1)) for c in doc["cases"]]
    return write(out_dir, doc["meta"], cases, doc["rows"], doc.get("peaks"), doc.get("bandwidth_tbps"), draw)


def merge(dirs, out_dir, draw=True):
    """One results directory from several (``ncudnn bench --shard I/N`` on several GPUs, or a run and a
    re-run of some cases): directories or tarballs (:mod:`bench.pack`). Cases in first-seen order; one row
    per (case, implementation), a later source's row replacing an earlier one unless the later is only
    "skipped"; the first source's meta, with every source's command and wall time, and the first host-
    overhead section found. report.md and the charts are drawn from the merged rows."""
    from .cases import Case
    from .pack import results_dir

    dirs = list(dirs)
    docs = [json.loads((results_dir(d) / "results.json").read_text()) for d in dirs]
    meta = dict(docs[0]["meta"])
    meta["shards"] = [{"dir": str(d), "command": doc["meta"].get("provenance", {}).get("command"),
                       "wall_s": doc["meta"].get("wall_s"), "stopped": doc["meta"].get("stopped"),
                       "progress": doc["meta"].get("progress"),
                       "env": doc["meta"].get("provenance", {}).get("env")} for d, doc in zip(dirs, docs)]
    meta["wall_s"] = max(doc["meta"].get("wall_s") or 0 for doc in docs)
    meta.pop("progress", None)
    if not meta.get("overhead"):
        meta["overhead"] = next((doc["meta"]["overhead"] for doc in docs if doc["meta"].get("overhead")), None)
    seen, cases, rows = set(), [], {}
    for doc in docs:
        for c in doc["cases"]:
            key = (c["suite"], c["op"], c["name"], c["dtype"])
            if key in seen:
                continue
            seen.add(key)
            cases.append(Case(c["suite"], c["op"], c["name"], c["params"], c["dtype"], c["layout"], c["flops"],
                              c["bytes"], c["quick"], c["source"], c.get("count", 1)))
        for r in doc["rows"]:
            k = (r["case"], r["impl"])
            if k not in rows or r.get("status") != "skipped":
                rows[k] = r
    ran = {k[0] for k, r in rows.items() if r.get("status") != "skipped"}
    merged = [r for k, r in rows.items() if r.get("status") != "skipped" or k[0] not in ran]
    from .suite import stop_summary

    meta["stopped"] = f"merged from {len(docs)}: " + stop_summary(merged, cases)
    return write(out_dir, meta, cases, merged, docs[0].get("peaks"), docs[0].get("bandwidth_tbps"), draw)
