"""``ncudnn bench``: ncudnn beside cuDNN (through torch and cudnn-frontend) and cuBLAS, in one run.

    ncudnn bench [--suite conv|gemm|norm|pool|softmax|pointwise|reduce|attention|all] [--quick] [--sim] [--tune]
                 [--tune-budget S] [--overhead] [--filter TEXT] [--out DIR] [--max-minutes M] [--list]
                 [--report DIR|TGZ] [--merge DIR|TGZ ... --out DIR] [--pack [TGZ]] [--no-charts]

Runs the runners of the repository's ``bench/`` directly (not through pytest) and writes ``--out DIR``
(default ``./bench-results/<gpu>/<date>[-quick]/`` under the current directory, never inside the installed
package): ``results.json`` (every row, versions, clocks, commit), ``report.md`` (the table it also prints)
and PNG charts. Without a GPU it says what is missing, unless ``--sim`` asks for the simulator smoke run
(tiny shapes, wall clock).

Exit status: 0 when ncudnn was measured on at least one case (``--list``: at least one case selected);
1 when nothing was benchmarked that was asked for (no GPU, no ``bench/`` directory, no case selected,
or every ncudnn row skipped, failed or refused); 2 for bad options.

``results.json`` and ``report.md`` are rewritten after every case, so a run cut short (``timeout``, a lost
machine) keeps what ran; ``--max-minutes`` stops between cases and SIGTERM / SIGINT stop at once, both
recording the rest as skipped and writing the report. ``--pack`` makes one tarball of the directory;
``--merge`` takes directories or such tarballs and redraws the report and charts of the merged rows.
"""
import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the default results folder, under the current directory
DEFAULT_OUT = "bench-results"
#: exit statuses
OK, NOTHING, USAGE = 0, 1, 2


def _bench():
    """Import the repository's bench package (it is not installed with ncudnn)."""
    if not (ROOT / "bench" / "cases.py").exists():
        return None
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import bench.cases  # noqa: F401

    return sys.modules["bench"]


def build_parser(ap=None):
    ap = ap or argparse.ArgumentParser(prog="ncudnn bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="all",
                    choices=("conv", "gemm", "norm", "pool", "softmax", "pointwise", "reduce", "attention", "all"))
    ap.add_argument("--quick", action="store_true", help="the representative subset (a few minutes on an H200)")
    ap.add_argument("--sim", action="store_true", help="without a GPU: a tiny smoke run in the CUDA simulator")
    ap.add_argument("--tune", action="store_true", help="also time ncudnn's autotuned best (ncudnn-tuned)")
    ap.add_argument("--overhead", action="store_true",
                    help="also the plan-build / execute host-overhead benchmarks (ncudnn and cudnn-frontend)")
    ap.add_argument("--out", help=f"results directory (default ./{DEFAULT_OUT}/<gpu>/<date>[-quick])")
    ap.add_argument("--max-minutes", type=float, help="wall-clock budget; cases past it are recorded as skipped")
    ap.add_argument("--filter", metavar="TEXT", help="only cases whose id contains TEXT (e.g. c4_3x3, bfloat16); comma-separated terms: any of "
                    "them, and none of the terms written !TERM (e.g. 'conv/,!_n128')")
    ap.add_argument("--no-charts", action="store_true", help="write JSON and markdown only")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("--shard", metavar="I/N", help="run every N-th selected case starting at I (0-based): one "
                    "shard per GPU, merged afterwards with --merge")
    ap.add_argument("--merge", nargs="+", metavar="DIR", help="merge the results.json of shard directories (or "
                    "--pack tarballs) into --out: report and charts drawn from the merged rows")
    ap.add_argument("--report", metavar="DIR", help="redraw report.md and the charts from DIR/results.json (DIR: "
                    "a directory, or a tarball from --pack, redrawn into --out when given)")
    ap.add_argument("--tune-budget", type=float, metavar="S", help="seconds of autotuning per case for --tune "
                    "(default 30 full, 15 quick); configs are timed in the heuristic's order until it is spent")
    ap.add_argument("--pack", nargs="?", const="", metavar="TGZ", help="also pack the results directory into one "
                    "tarball (default <out>.tgz; a GPU call returns few files); with --merge/--report: of --out/DIR")
    return ap


def argv_of(ns):
    """The ``ncudnn bench`` argument list that parses back to namespace ``ns`` (every option of
    :func:`build_parser`, so ``ncudnn bench ...`` from the top-level CLI forwards all of them)."""
    argv = []
    for a in build_parser()._actions:
        if not a.option_strings or a.dest == "help":
            continue
        v, opt = getattr(ns, a.dest, a.default), a.option_strings[-1]
        if v is None or v == a.default:
            continue
        if a.nargs == 0:             # store_true
            argv.append(opt)
        elif a.nargs in ("+", "*"):
            argv += [opt, *v]
        elif a.nargs == "?" and v == a.const:
            argv.append(opt)
        else:
            argv.append(f"{opt}={v}")
    return argv


def _out_dir(args, prov):
    from bench.env import device_name, slug

    if args.out:
        return Path(args.out)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    tag = "-sim" if args.sim else ("-quick" if args.quick else "")
    suite = "" if args.suite == "all" else f"-{args.suite}"
    return Path.cwd() / DEFAULT_OUT / slug(device_name(prov)) / f"{date}{tag}{suite}"


def _overhead(out_dir, env):
    """bench_plan_overhead.py (ncudnn) and fe_overhead.py (cudnn-frontend) in fresh processes, each writing
    its JSON into ``out_dir`` (``NCUDNN_BENCH_OUT``)."""
    import os

    env_vars = dict(os.environ)
    env_vars["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env_vars.get("PYTHONPATH")]))
    env_vars["NCUDNN_BENCH_OUT"] = str(Path(out_dir).resolve())
    res, started = {}, time.time()
    for name, script in (("ncudnn", "bench_plan_overhead.py"), ("cudnn_frontend", "fe_overhead.py")):
        try:
            p = subprocess.run([sys.executable, str(ROOT / "bench" / script)], capture_output=True, text=True,
                               timeout=180, cwd=ROOT, env=env_vars)
        except (OSError, subprocess.SubprocessError) as e:  # a hung or missing script: recorded, not fatal
            res[name] = {"rc": None, "error": f"{type(e).__name__}: {e}"[:400]}
            continue
        print(p.stdout[-4000:], end="")
        res[name] = {"rc": p.returncode, "stdout_tail": p.stdout[-4000:], "stderr_tail": p.stderr[-2000:]}
    for f in Path(out_dir).glob("*overhead-*.json"):
        if f.stat().st_mtime < started:
            continue  # an earlier run's
        try:
            res.setdefault("files", {})[f.name] = json.loads(f.read_text())
        except ValueError:
            pass
    (Path(out_dir) / "overhead.json").write_text(json.dumps(res, indent=1))
    return res


def main(argv=None):
    args = build_parser().parse_args(argv)
    if _bench() is None:
        print("ncudnn bench: the bench/ directory is not next to this ncudnn (run it from a source checkout). "
              "Nothing benchmarked.")
        return NOTHING
    from bench import cases as C
    from bench import pack, report, suite

    if args.merge:
        if not args.out:
            print("ncudnn bench: --merge needs --out DIR")
            return USAGE
        md, files = report.merge(args.merge, args.out, not args.no_charts)
        print(md)
        print(f"merged {len(args.merge)} result directories / tarballs into {args.out}: {', '.join(files)}")
        _pack(args, args.out)
        return OK
    if args.report:
        src = pack.results_dir(args.report)   # a tarball is extracted into a temporary directory
        if args.out and Path(args.out).resolve() != Path(src).resolve():   # ... or redrawn into --out
            import shutil

            shutil.copytree(src, args.out, dirs_exist_ok=True)
            src = Path(args.out)
        md, files = report.rerender(src, not args.no_charts)
        print(md)
        print(f"rewrote {', '.join(files)} in {src}")
        _pack(args, src)
        return OK
    env = suite.detect()
    sel = C.select(args.suite, args.quick, sim=args.sim)
    if args.filter:
        sel = [c for c in sel if C.matches(c.id, args.filter)]
    if args.shard:
        i, n = (int(v) for v in args.shard.split("/"))
        if not 0 <= i < n:
            print(f"ncudnn bench: --shard {args.shard}: want I/N with 0 <= I < N")
            return USAGE
        sel = sel[i::n]
    if args.list:
        for c in sel:
            print(f"{c.id:60s} {c.flops / 1e9:10.2f} GFLOP {c.bytes / 1e6:10.1f} MB  {c.source}")
        print(f"{len(sel)} cases")
        return OK if sel else NOTHING
    if not sel:
        print(f"ncudnn bench: no case selected (suite {args.suite}{', quick' if args.quick else ''}"
              f"{f', filter {args.filter!r}' if args.filter else ''}{f', shard {args.shard}' if args.shard else ''}): "
              "nothing benchmarked. `--list` shows the cases.")
        return NOTHING
    if env.missing:
        print("ncudnn bench: missing here: " + "; ".join(env.missing))
    if env.simulator and not args.sim:
        print("ncudnn bench: no GPU, so nothing was benchmarked (exit 1). `ncudnn bench --sim` runs a tiny smoke "
              "run of the harness in the CUDA simulator; the numbers belong to a GPU machine.")
        return NOTHING
    if args.sim and not env.simulator:
        print("ncudnn bench: --sim asks for the simulator but a GPU is present; running the tiny cases on the GPU.")
    if not env.torch_ok and not env.simulator:
        print("ncudnn bench: benchmarking ncudnn alone (no torch: no cuDNN/cuBLAS reference; the NumPy float64 "
              "oracle checks small cases only).")
    from bench import env as E

    prov = E.provenance(env.simulator, ["ncudnn", "bench"] + list(argv if argv is not None else sys.argv[1:]))
    out_dir = _out_dir(args, prov)
    t0 = time.perf_counter()
    bw = E.copy_bandwidth_tbps() if env.torch_ok else None
    peaks = E.spec_peaks(E.device_name(prov))
    print(f"ncudnn bench: {len(sel)} cases ({args.suite}{', quick' if args.quick else ''}) on {E.device_name(prov)}"
          f"{f'; copy bandwidth {bw:.2f} TB/s' if bw else ''}")
    mode = suite.mode_of(args.quick, env.simulator)
    from bench.timing import BUDGET_S, REPS, WARMUP

    bw_roof = bw or (peaks or {}).get("hbm_tbps")
    meta = {"device": E.device_name(prov), "provenance": prov, "mode": mode, "suite": args.suite,
            "missing": env.missing, "bw_measured": bw is not None, "wall_s": 0.0}
    if args.tune:
        meta["tune_budget_s"] = args.tune_budget or suite.TUNE_BUDGET_S[mode]

    def timing_text(clock):
        return (f"{clock.name}; "
                + (f"L2 flushed before every rep by a {clock.flush_bytes >> 20} MiB write; " if clock.flush_bytes
                   else "no L2 flush (simulator: numbers only show the harness works); ")
                + f"{WARMUP[mode]} warm-up runs excluded; {BUDGET_S[mode]} s per implementation, "
                f"reps in [{REPS[mode][0]}, {REPS[mode][1]}]; median (p20, p80 in results.json)")

    seen = {"rows": []}

    def checkpoint(rows, done):
        """results.json + report.md of the cases done so far, after every case (no charts)."""
        seen["rows"] = rows
        ids = {r["case"] for r in rows}
        meta.update(wall_s=time.perf_counter() - t0, progress=f"{done} of {len(sel)} cases (run under way)")
        try:
            report.write(out_dir, meta, [c for c in sel if c.id in ids], rows, peaks, bw_roof, False)
        except Exception as e:  # noqa: BLE001 - a failed checkpoint must not stop the run
            print(f"ncudnn bench: checkpoint not written ({type(e).__name__}: {e})")

    restore = _sigterm_as_interrupt()
    try:
        rows, clock = suite.run(sel, env, args.quick, args.tune, args.max_minutes, on_case=checkpoint,
                                tune_budget_s=args.tune_budget)
    except KeyboardInterrupt:  # between cases, while a checkpoint was written: keep what ran
        rows, clock = seen["rows"], None
        done = {r["case"] for r in rows}
        rows = rows + [suite.skipped_row(c, "interrupted (SIGINT / SIGTERM)") for c in sel if c.id not in done]
    finally:
        restore()
    meta.pop("progress", None)
    meta.update(wall_s=time.perf_counter() - t0, stopped=suite.stop_summary(rows, sel))
    if clock is not None:
        meta["timing"] = timing_text(clock)
    if args.overhead and env.gpu:
        out_dir.mkdir(parents=True, exist_ok=True)
        restore = _sigterm_as_interrupt()
        try:
            meta["overhead"] = _overhead(out_dir, env)
        except KeyboardInterrupt:
            meta["overhead"] = {"error": "interrupted (SIGINT / SIGTERM)"}
        finally:
            restore()
    md, files = report.write(out_dir, meta, sel, rows, peaks, bw_roof, not args.no_charts)
    print(md)
    print(f"ncudnn bench: {len(rows)} rows in {meta['wall_s']:.0f} s; {meta['stopped']}; "
          f"wrote {', '.join(files)} to {out_dir}")
    _pack(args, out_dir)
    if not measured(rows):
        print("ncudnn bench: no ncudnn row was measured (every case skipped, refused or failed): exit 1")
        return NOTHING
    return OK


def measured(rows):
    """The ncudnn rows (default and tuned) that were timed: status ok, or timed with no reference to check."""
    return [r for r in rows if str(r.get("kind", "")).startswith("ncudnn") and r.get("status") in ("ok", "not checked")]


def _sigterm_as_interrupt():
    """SIGTERM (``timeout``'s signal) raises KeyboardInterrupt like SIGINT, so the run stops cleanly and
    writes what ran; returns the function that puts the previous handler back."""
    import signal

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    try:
        prev = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread (e.g. under a test runner's worker)
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, prev)


def _pack(args, out_dir):
    """``--pack [TGZ]``: the results directory as one tarball."""
    if args.pack is None:
        return None
    from bench import pack

    tgz = pack.pack(out_dir, args.pack or None)
    print(f"ncudnn bench: packed {out_dir} into {tgz}")
    return tgz


if __name__ == "__main__":
    sys.exit(main())
