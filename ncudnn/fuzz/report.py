"""The summary of a fuzz run: counts of graphs, plans and executions (an execution is one
(graph, plan, input draw) triple, the unit "cases" counts) by family, by engine and by heuristic mode,
the wrong and error counts with a repro line for each failure, and why graphs were refused; as JSON and
as markdown.

The per-engine table has a row for every registered engine (``meta["engines"]``), 0 where no case
reached it, so an engine the generators miss shows in every report. An engine that ran only as a part
of composite plans is counted in the "as a composite part" column (the composite's plan name lists the
engines of its parts)."""
import json
import os
from collections import Counter, defaultdict

OUTCOMES = ("ok", "wrong", "error", "refused", "invalid")


def registered_engines():
    """Names of every registered engine, in global-index order."""
    from ..engines import registry

    return [e.name for e in registry.engines()]


def summarize(results, meta):
    fam = defaultdict(lambda: Counter())
    eng = defaultdict(lambda: Counter())
    modes = Counter()
    refusals = defaultdict(Counter)
    failures = []
    for r in results:
        f = fam[r["family"]]
        f["graphs"] += 1
        f[r["outcome"]] += 1
        if r.get("front_end") == "backend":
            f["backend_api_graphs"] += 1
        if r.get("cut") is not None:
            f["cut_at_deadline"] += 1
        f["plans_built"] += r.get("plans_built", len(r.get("plans", [])))
        f["plans_run"] += len(r.get("plans", []))
        f["executions"] += r.get("executions", 0)
        f["build_s"] += r.get("build_s", 0.0)
        f["run_s"] += r.get("run_s", 0.0)
        f["first_draw_s"] += r.get("first_draw_s", 0.0)
        for p in r.get("plans", []):
            e = eng[p["engine"]]
            e["plans"] += 1
            e["executions"] += p["executions"]
            for part in p.get("parts", ()):
                eng[part]["part_plans"] += 1
                eng[part]["part_executions"] += p["executions"]
            e["wrong"] += p["wrong"]
            e["errors"] += p.get("errors", 0)
            f["wrong_executions"] += p["wrong"]
            f["error_executions"] += p.get("errors", 0)
            for m in p.get("first_of", []):
                modes[m] += p["executions"]
        if r["outcome"] in ("refused", "invalid"):
            refusals[r["family"]][(r["outcome"] + ": " + r.get("why", ""))[:160]] += 1
        for x in r.get("failures", []):
            failures.append({"family": r["family"], "desc": r.get("desc", ""), **x})
    total = Counter()
    for f in fam.values():
        total.update(f)
    meta = dict(meta)
    meta.setdefault("engines", registered_engines())
    for name in meta["engines"]:
        eng.setdefault(name, Counter())
    return {
        "meta": meta,
        "total": dict(total),
        "cases": total["executions"],
        "wrong": total["wrong_executions"],
        "errors": total["error_executions"] + len([x for x in failures if x["kind"] == "error" and "execute raised" not in x["what"]]),
        "per_family": {k: dict(v) for k, v in sorted(fam.items())},
        "per_engine": {k: dict(v) for k, v in sorted(eng.items())},
        "first_plan_of_mode_executions": dict(modes),
        "failures": failures[:500],
        "failures_total": len(failures),
        "refusals": {k: v.most_common(8) for k, v in refusals.items()},
    }


def _add(into, d):
    for k, v in d.items():
        if isinstance(v, dict):
            _add(into.setdefault(k, {}), v)
        else:
            into[k] = into.get(k, 0) + v


def merge(parts):
    """One summary of several :func:`summarize` results (one per run)."""
    metas = [p["meta"] for p in parts]
    meta = dict(metas[0]) if metas else {}
    meta.update(seed=[m.get("seed") for m in metas], wall_s=sum(m.get("wall_s", 0) for m in metas), runs=metas,
                families=sorted({f for m in metas for f in m.get("families", [])}),
                engines=list(dict.fromkeys([n for m in metas for n in m.get("engines", [])] + registered_engines())))
    out = {"meta": meta, "total": {}, "per_family": {}, "per_engine": {}, "first_plan_of_mode_executions": {}}
    for p in parts:
        for k in ("total", "per_family", "per_engine", "first_plan_of_mode_executions"):
            _add(out[k], p[k])
    for k in ("cases", "wrong", "errors", "failures_total"):
        out[k] = sum(p[k] for p in parts)
    out["failures"] = [x for p in parts for x in p["failures"]][:500]
    refusals = defaultdict(Counter)
    for p in parts:
        for fam, rows in p["refusals"].items():
            for why, n in rows:
                refusals[fam][why] += n
    out["refusals"] = {k: v.most_common(8) for k, v in refusals.items()}
    for name in meta["engines"]:
        out["per_engine"].setdefault(name, {})
    return out


def markdown(s):
    m = s["meta"]
    t = s["total"]
    lines = [f"# ncudnn differential fuzz: {s['cases']} cases, {s['wrong']} wrong, {s['errors']} errors", "",
             "Wrong: an output differed from the oracle or an element outside a view changed (a silent wrong "
             "answer). Errors: an execution or plan build that failed after check_support accepted it.", "",
             f"seed {m.get('seed')}, families {', '.join(m.get('families', []))}, {m.get('jobs')} job(s), "
             f"{m.get('draws')} draw(s) per plan, wall {m.get('wall_s', 0):.0f} s, device {m.get('device', '?')}, "
             f"commit {m.get('commit', '?')}", "",
             "A case is one (graph, plan, input draw) execution compared with the float64 oracle.", "",
             f"graphs {t.get('graphs', 0)} (ok {t.get('ok', 0)}, wrong {t.get('wrong', 0)}, error {t.get('error', 0)}, "
             f"refused {t.get('refused', 0)}, invalid {t.get('invalid', 0)}; {t.get('cut_at_deadline', 0)} cut short at the "
             f"deadline, their plans run on fewer draws), plans built {t.get('plans_built', 0)}, "
             f"plans run {t.get('plans_run', 0)}, executions {t.get('executions', 0)}; worker time "
             f"{t.get('build_s', 0):.0f} s planning and building, {t.get('run_s', 0):.0f} s executing and checking "
             f"(each plan's first execution, which compiles its kernels, {t.get('first_draw_s', 0):.0f} s): per plan built "
             f"{t.get('build_s', 0) / max(t.get('plans_built', 0), 1):.2f} s, per later execution "
             f"{(t.get('run_s', 0) - t.get('first_draw_s', 0)) / max(t.get('executions', 0) - t.get('plans_run', 0), 1) * 1e3:.2f} ms "
             "(the oracle, uploads and checks included)", "",
             "| family | graphs | via backend API | refused | plans built | plans run | cases | wrong | errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, v in s["per_family"].items():
        lines.append(f"| {k} | {v.get('graphs', 0)} | {v.get('backend_api_graphs', 0)} | {v.get('refused', 0)} | {v.get('plans_built', 0)} | "
                     f"{v.get('plans_run', 0)} | {v.get('executions', 0)} | {v.get('wrong_executions', 0)} | "
                     f"{v.get('error_executions', 0)} |")
    engines = list(dict.fromkeys(list(m.get("engines", [])) + sorted(s["per_engine"])))
    unreached = [k for k in engines if not s["per_engine"].get(k, {}).get("executions")
                 and not s["per_engine"].get(k, {}).get("part_executions")]
    lines += ["", "Every registered engine: cases on its own plans, and on composite plans that run one of their "
              "parts on it.", "",
              "| engine | plans | cases | wrong | errors | as a composite part: plans | cases |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k in engines:
        v = s["per_engine"].get(k, {})
        lines.append(f"| {k} | {v.get('plans', 0)} | {v.get('executions', 0)} | {v.get('wrong', 0)} | "
                     f"{v.get('errors', 0)} | {v.get('part_plans', 0)} | {v.get('part_executions', 0)} |")
    lines += ["", "Engines no case reached: " + (", ".join(unreached) if unreached else "none")]
    lines += ["", "Cases on the first plan of each heuristic mode: "
              + ", ".join(f"{k} {v}" for k, v in sorted(s["first_plan_of_mode_executions"].items())), ""]
    if s["failures"]:
        lines += [f"## Failures ({s['failures_total']})", ""]
        for x in s["failures"][:100]:
            lines.append(f"- {x['kind']} {x['family']}: `{x['repro']}`: {x['what'][:300]} ({x['desc'][:200]})")
        lines.append("")
    if s["refusals"]:
        lines += ["## Most common refusals", ""]
        for k, v in s["refusals"].items():
            for why, n in v:
                lines.append(f"- {k} x{n}: {why}")
    return "\n".join(lines) + "\n"


def write(s, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fuzz_report.json"), "w") as f:
        json.dump(s, f, indent=1)
    with open(os.path.join(out, "fuzz_report.md"), "w") as f:
        f.write(markdown(s))
