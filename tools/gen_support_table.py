"""Write docs/support.md: what ncudnn runs, op x dtype x layout x engines, asked of the engine registry.

    python tools/gen_support_table.py            # rewrite docs/support.md
    python tools/gen_support_table.py --check    # exit 1 if docs/support.md is not what it would write

Every row is one op of the benchmark suite (bench/cases.py) in one data type and layout. Its graphs are
built the way the benchmark builds them (bench/graphs.py, through pygraph) at every shape the suite has
for that op, then every registered engine is asked ``check_support`` through ``engines.api`` against a
nominal H200 (sm_90; nothing is compiled or run), once with TF32 off and once with it allowed. Nothing
in the table is written by hand, so it cannot drift from the code: tests/test_support_table.py
regenerates it and compares with the committed file.
"""
import argparse
import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "support.md"
#: the data types every op is asked about
DTYPES = ("float32", "float16", "bfloat16")
#: layouts asked about: image-shaped ops in both; the others keep the suite's own layout
IMAGE_LAYOUTS = ("nhwc", "nchw")


def _layouts(case):
    return IMAGE_LAYOUTS if case.layout in IMAGE_LAYOUTS else (case.layout,)


def _contexts():
    from ncudnn.engines import device
    from ncudnn.engines.base import BuildContext

    return BuildContext(device=device.H200), BuildContext(device=device.H200, allow_tf32=True)


def _ask(ncudnn, api, registry, case, ctx, ctx_tf32):
    """(engines supported with TF32 off, engines supported only with TF32 allowed, a refusal reason)."""
    from bench import graphs

    try:
        g, _, _ = graphs.build(ncudnn, case)
        ir = g.ir
        api.problem(ir)
    except Exception as e:  # noqa: BLE001 - a graph the front end refuses is a row of the table
        return (), (), f"graph refused: {_short(getattr(e, 'message', None) or e)}"
    plain = [e.name for e in api.supported_engines(ir, ctx)]
    tf32 = [e.name for e in api.supported_engines(ir, ctx_tf32) if e.name not in plain]
    reason = ""
    if not plain and not tf32:   # the reason of the first engine made for this kind of subgraph
        kind = getattr(api.problem(ir), "kind", None)
        engines = [e for e in registry.engines() if e.name != "composite"]
        engines = [e for e in engines if kind in e.kinds] or engines
        reason = next((r for r in (api.check_support(ir, e.name, ctx)[1] for e in engines) if r), "")
    return plain, tf32, _short(reason)


def _short(text, n=110):
    text = re.sub(r":\w+:`([^`]*)`", r"`\1`", " ".join(str(text).split())).replace("``", "`").replace("|", "/")
    return text if len(text) <= n else text[:n - 3] + "..."


def rows(suites=None):
    """The op rows (op, dtypes, layouts, shapes, engines, notes); ``suites``: only those benchmark suites."""
    import ncudnn
    from bench import cases as C
    from ncudnn.engines import api, registry

    ctx, ctx_tf32 = _contexts()
    order = {name: i for i, name in enumerate(registry.ENGINE_ORDER)}
    groups = {}
    for c in C.select("all"):
        if suites and c.suite not in suites:
            continue
        groups.setdefault((c.suite, c.op), {}).setdefault((c.name, tuple(sorted(c.params.items()))), c)
    out = []
    for (suite, op), shapes in sorted(groups.items(), key=lambda kv: C.SUITES.index(kv[0][0])):
        shapes = list(shapes.values())
        for dtype in DTYPES:
            for layout in _layouts(shapes[0]):
                count, count32, reasons = {}, {}, []
                for c in shapes:
                    c = dataclasses.replace(c, dtype=dtype, layout=layout)
                    plain, tf32, why = _ask(ncudnn, api, registry, c, ctx, ctx_tf32)
                    for e in plain:
                        count[e] = count.get(e, 0) + 1
                    for e in tf32:
                        count32[e] = count32.get(e, 0) + 1
                    if why:
                        reasons.append(why)
                n = len(shapes)
                cells = []
                for e in sorted(set(count) | set(count32), key=order.get):
                    k, k32 = count.get(e, 0), count32.get(e, 0)
                    tags = []
                    if k and k < n:
                        tags.append(f"{k}/{n} shapes")
                    if k32:
                        tags.append("TF32" + ("" if k + k32 == n or not k else f": {k32} more shapes")
                                    + (f", {k32}/{n} shapes" if not k and k32 < n else ""))
                    cells.append(f"`{e}`" + (f" ({'; '.join(tags)})" if tags else ""))
                notes = []
                if reasons and len(reasons) == n:
                    notes.append("not supported: " + reasons[0])
                elif reasons:
                    notes.append(f"{len(reasons)} shapes refused, e.g. " + reasons[0])
                out.append((f"{suite}/{op}", dtype, layout, n, ", ".join(cells) or "—", "; ".join(notes)))
    return _merged(out)


def _merged(out):
    """Rows of one op that differ only in data type (then only in layout) folded into one row."""
    by = {}
    for op, dt, lay, n, eng, note in out:
        by.setdefault((op, lay, n, eng, note), []).append(dt)
    rows1 = [(op, ", ".join(dts), lay, n, eng, note) for (op, lay, n, eng, note), dts in by.items()]
    by = {}
    for op, dts, lay, n, eng, note in rows1:
        by.setdefault((op, dts, n, eng, note), []).append(lay)
    return [(op, dts, ", ".join(lays), n, eng, note) for (op, dts, n, eng, note), lays in by.items()]


def _notes(e):
    notes = [n.name.replace("CUDNN_NUMERICAL_NOTE_", "") for n in e.numerical_notes]
    return ", ".join(notes + (["fallback"] if e.fallback else []))


def _what(e):
    """The first sentence of the engine class's docstring, else of its module's."""
    doc = type(e).__doc__ or getattr(sys.modules.get(type(e).__module__), "__doc__", None) or ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    cut = para.find(". ")
    return _short(para[:cut + 1] if cut > 0 else para, 160)


def engine_rows():
    from ncudnn.engines import registry

    by_name = {e.name: e for e in registry.engines()}
    out = []
    for i, name in enumerate(registry.ENGINE_ORDER):
        e = by_name.get(name)
        if e is None:
            out.append((i, name, "—", "", "", "not registered (its module did not load)"))
            continue
        lay = getattr(e.preferred_layout, "name", "") if e.preferred_layout is not None else ""
        out.append((i, name, ", ".join(e.kinds) or "—", _notes(e), lay.replace("CUDNN_LAYOUT_TYPE_PREFERRED_", ""),
                    _what(e)))
    return out


def render():
    from ncudnn.engines import registry

    lines = [
        "# What ncudnn runs",
        "",
        "<!-- GENERATED by tools/gen_support_table.py: do not edit; run `python tools/gen_support_table.py` -->",
        "",
        "Generated from the engine registry (`ncudnn/engines/registry.py`) by `python tools/gen_support_table.py`;",
        "`tests/test_support_table.py` fails when this file is not what the code says. Each row is one op of the",
        "benchmark suite (`bench/cases.py`) in one data type and layout, built as the benchmark builds it",
        "(`bench/graphs.py`, through pygraph) at every shape the suite has for it (*shapes*), and every engine is",
        "asked `check_support` against a nominal H200 (sm_90); nothing is compiled. *Engines* are the ones that",
        "accept it, in global-index order: \"k/n shapes\" when only some shapes, \"TF32\" when only with TF32",
        "allowed (`allow_tf32` / the DOWN_CONVERT_INPUTS note). The I/O data type is the row's; statistics, scale",
        "and bias tensors of the norms are FP32, and every engine computes in FP32. Other shapes, strides and",
        "fusions may be accepted or refused: `check_support` gives the reason for any graph.",
        "",
        "## Ops",
        "",
        "| op | dtype | layout | shapes | engines | notes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {op} | {dt} | {lay} | {n} | {eng} | {note} |" for op, dt, lay, n, eng, note in rows()]
    lines += [
        "",
        "## Engines",
        "",
        "The registry's engines by global index (`CUDNN_ATTR_ENGINE_GLOBAL_INDEX`): the subgraph kinds each",
        "accepts, its numerical notes (`fallback`: the engine heuristic mode FALLBACK picks), the layout it prefers,",
        "and what its class says it is.",
        "",
        "| index | engine | kinds | notes | prefers | what |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {i} | `{n}` | {k} | {nt} | {lay} | {doc} |" for i, n, k, nt, lay, doc in engine_rows()]
    if registry.load_errors:
        lines += ["", "Engine modules that failed to import: "
                  + "; ".join(f"`{m}`: {_short(err)}" for m, err in sorted(registry.load_errors.items()))]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with docs/support.md instead of writing it")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("docs/support.md is up to date" if same else
              "docs/support.md is stale: run `python tools/gen_support_table.py`")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
