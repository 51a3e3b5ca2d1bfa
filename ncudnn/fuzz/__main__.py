"""``python -m ncudnn.fuzz``: run the differential fuzzer, or one case again from its repro line.

    python -m ncudnn.fuzz --seed 1 --cases 200 --families conv,matmul --jobs 4 --seconds 600 --out DIR
    python -m ncudnn.fuzz --repro conv:1:17 [--draw 0] [--engine conv_direct]
"""
import argparse
import json
import os
import sys
import time

from .families import FAMILIES


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m ncudnn.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cases", type=int, default=100, help="graphs to generate (the run may stop at --seconds)")
    p.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated of {', '.join(FAMILIES)}")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (each its own CUDA context)")
    p.add_argument("--seconds", type=float, default=None, help="stop starting cases after this long")
    p.add_argument("--draws", type=int, default=2, help="input draws run on every plan of a graph")
    p.add_argument("--max-plans", type=int, default=None, help="run a seeded sample of at most this many plans")
    p.add_argument("--out", default=None, help="directory for the worker logs and fuzz_report.{json,md}")
    p.add_argument("--repro", default=None, help="family:seed:case to run again, printing every execution")
    p.add_argument("--draw", type=int, default=None)
    p.add_argument("--engine", default=None)
    p.add_argument("--merge", nargs="+", default=None, help="merge the worker results of these --out directories")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _repro(a):
    from .runner import run_case

    fam, seed, case = a.repro.split(":")
    draws = max(a.draws, (a.draw or 0) + 1)
    r = run_case(fam, int(seed), int(case), draws=draws, engine=a.engine, only_draw=a.draw, verbose=True)
    print(f"{a.repro}: {r['desc']}")
    print(f"outcome {r['outcome']}, {r['executions']} execution(s) {r.get('why', '')}")
    for x in r["failures"]:
        print(f"  {x['kind']}: {x['what']}\n    {x['repro']}")
    return 0 if r["outcome"] in ("ok", "refused") else 1


def _merge(a):
    """One report of several runs (e.g. one device call each) from their fuzz_report.json files: counts
    summed, failures and refusals concatenated, seeds and wall times listed."""
    from . import report

    parts = []
    for d in a.merge:
        with open(os.path.join(d, "fuzz_report.json")) as f:
            parts.append(json.load(f))
    s = report.merge(parts)
    if a.out:
        report.write(s, a.out)
    print(json.dumps({"cases": s["cases"], "wrong": s["wrong"], "errors": s["errors"]}))
    return 0 if s["wrong"] == 0 and s["errors"] == 0 else 1


def _meta(a, wall):
    from ..engines import device
    from ..testing import SIM

    try:
        dev = device.current().name
    except Exception:  # noqa: BLE001 - the report names the device where it can
        dev = "?"
    return {"seed": a.seed, "cases_requested": a.cases, "families": a.families.split(","), "jobs": a.jobs,
            "draws": a.draws, "max_plans": a.max_plans, "seconds": a.seconds, "wall_s": wall, "device": dev + (" (CUDA simulator)" if SIM else ""),
            "commit": os.environ.get("NCUDNN_GIT_COMMIT", "?")}


def main(argv=None):
    a = _args(sys.argv[1:] if argv is None else argv)
    if a.repro:
        return _repro(a)
    if a.merge:
        return _merge(a)
    fams = a.families.split(",")
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        print(f"unknown families {unknown}; known: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    if a.worker is not None:
        from .pool import worker

        return worker(a.worker, a.jobs, a.seed, a.cases, fams, a.out, a.deadline, a.draws, a.max_plans)
    from . import report
    from .pool import run_local, run_pool

    t0 = time.time()
    if a.jobs > 1:
        if not a.out:
            print("--jobs > 1 needs --out", file=sys.stderr)
            return 2
        results = run_pool(a.seed, a.cases, fams, a.jobs, a.out, a.seconds or 1e9, a.draws, a.max_plans)
    else:
        def show(r):
            for x in r["failures"]:
                print(f"{x['kind']}: {x['repro']}: {x['what'][:300]}", flush=True)

        deadline = None if a.seconds is None else t0 + a.seconds
        results = run_local(a.seed, a.cases, fams, a.draws, a.max_plans, deadline, show)
    s = report.summarize(results, _meta(a, time.time() - t0))
    if a.out:
        report.write(s, a.out)
    print(json.dumps({"cases": s["cases"], "wrong": s["wrong"], "errors": s["errors"], "graphs": s["total"].get("graphs", 0),
                      "refused": s["total"].get("refused", 0), "invalid": s["total"].get("invalid", 0)}))
    return 0 if s["wrong"] == 0 and s["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
