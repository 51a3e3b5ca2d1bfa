"""``python -m ncudnn.kernels show``: the generated source of an engine's kernels for one knob config.

    python -m ncudnn.kernels show --list                         engines, their knobs, the problems
    python -m ncudnn.kernels show matmul_simt                    the default config on the default problem
    python -m ncudnn.kernels show conv_implicit_precomp TILE_SIZE=2 --problem conv3x3 --dtype half

The engine builds its plan for a small representative problem (:mod:`.problems`; ``--problem`` and
``--dtype`` pick another) against a nominal H200 (sm_90), so every engine, the Hopper ones included, can
build in the simulator; nothing is launched. Each kernel the build compiles is printed with a header naming
it, its cache key and the compile-time constants it reads, then its source: the whole generated module for
kernels made from source strings, ``inspect.getsource`` for kernels written as functions. Knobs are given as
``NAME=VALUE`` (``TILE_SIZE`` or ``CUDNN_KNOB_TYPE_TILE_SIZE``; a number, or a label where the knob has
labels). An unknown engine, knob, value or problem exits with status 2 and says what is allowed.
"""
import argparse
import os
import sys
from types import SimpleNamespace

from . import capture
from . import problems as P

USAGE_ERROR = 2
_PREFIX = "CUDNN_KNOB_TYPE_"


class ShowError(Exception):
    """A command-line mistake: printed with what is allowed, exit status 2."""


def _context(tf32):
    from ..engines import device
    from ..engines.base import BuildContext

    # a handle stand-in with caches of its own: every build here is fresh, not served by the process plan cache
    return BuildContext(device=device.H200, simulator=True, allow_tf32=tf32, handle=SimpleNamespace(caches={}))


def _engine(name):
    from ..engines import registry

    eng = registry.get(name)
    if eng is None:
        names = ", ".join(e.name for e in registry.engines())
        raise ShowError(f"no engine {name!r}; registered engines: {names}")
    return eng


def _problem_graph(eng, problem, dtype, ctx):
    """(problem, dtype, finalized graph) the engine accepts: the given one, or the first of its defaults."""
    from ..engines import api

    if problem is not None and problem not in P.PROBLEMS:
        raise ShowError(f"no problem {problem!r}; problems: {', '.join(P.PROBLEMS)}")
    if dtype is not None and dtype not in P.DTYPES:
        raise ShowError(f"no data type {dtype!r}; data types: {', '.join(P.DTYPES)}")
    defaults = P.ENGINE_PROBLEMS.get(eng.name, ())
    if problem is not None:
        tried = [(problem, dtype or next((d for p, d in defaults if p == problem), "float"))]
    else:
        tried = [(p, d) for p, d in defaults if dtype in (None, d)] or [(p, dtype) for p, _ in defaults[:1]]
    reasons = []
    for prob, dt in tried:
        g = P.build(prob, dt)
        st, why = api.check_support(g, eng.name, ctx)
        if int(st) == 0:
            return prob, dt, g
        reasons.append(f"{prob} ({dt}): {why}")
    raise ShowError(f"{eng.name} accepts none of the problems tried: " + "; ".join(reasons or ["none given"]))


def _knob_name(spec):
    return spec.type.name[len(_PREFIX):] if spec.type.name.startswith(_PREFIX) else spec.type.name


def _labels(spec):
    """value -> label of a knob that indexes a table (``labels[value - min]``; empty labels left out)."""
    out = {}
    for v in spec.values():
        i = v - spec.min
        if i < len(spec.labels) and spec.labels[i]:
            out[v] = spec.labels[i]
    return out


def describe_knob(spec):
    """``TILE_SIZE: 0..11 (default 3)`` with the labels where the knob has them."""
    vals = list(spec.values())
    rng = f"{spec.min}..{spec.max}" + (f" step {spec.stride}" if spec.stride != 1 else "") if len(vals) > 2 \
        else " | ".join(map(str, vals))
    labels = ", ".join(f"{v}={lab}" for v, lab in _labels(spec).items())
    labels = f" [{labels}]" if labels else ""
    return f"{_knob_name(spec)}: {rng} (default {spec.default}){labels}"


def _knob_help(eng, specs):
    if not specs:
        return f"{eng.name} has no knobs"
    return f"{eng.name} knobs: " + "; ".join(describe_knob(s) for s in specs)


def parse_config(eng, sub, assignments, ctx):
    """The engine's Config for ``sub`` with the ``NAME=VALUE`` assignments applied and checked."""
    specs = eng.knobs(sub)
    by_name = {_knob_name(s).upper(): s for s in specs}
    cfg = eng.default_config(sub)
    for item in assignments:
        name, sep, value = item.partition("=")
        spec = by_name.get(name.strip().upper().removeprefix(_PREFIX))
        if not sep or spec is None:
            what = f"malformed knob {item!r} (want NAME=VALUE)" if not sep else f"unknown knob {name!r}"
            raise ShowError(f"{what}; {_knob_help(eng, specs)}")
        value = value.strip()
        by_label = {lab.lower(): v for v, lab in _labels(spec).items()}
        if value.lower() in by_label:
            v = by_label[value.lower()]
        else:
            try:
                v = int(value, 0)
            except ValueError:
                v = None
        if v is None or not spec.valid(v):
            raise ShowError(f"bad value {value!r} for knob {_knob_name(spec)}; {_knob_help(eng, specs)}")
        cfg = cfg.with_knob(spec.type, v)
    st, why = eng.keep(sub, cfg, ctx)
    if int(st) != 0:
        raise ShowError(f"{cfg} is not a valid config of this problem: {why}; {_knob_help(eng, specs)}")
    return cfg


def kernels_of(engine, knobs=(), problem=None, dtype=None, tf32=False):
    """(header lines, [(cache key, dispatcher)]) of the kernels ``engine`` builds for the config."""
    from ..engines import api

    capture.install()
    ctx = _context(tf32)
    eng = _engine(engine)
    prob, dt, g = _problem_graph(eng, problem, dtype, ctx)
    sub = api.problem(g)
    cfg = parse_config(eng, sub, knobs, ctx) if eng.name != "composite" else None
    with capture.collecting() as found:
        plan = api.build_plan(g, cfg if cfg is not None else eng.name, ctx)
    head = [f"engine {eng.name} (global index {eng.global_index}) on problem {prob} ({dt}): {sub.describe()}",
            f"config {cfg if cfg is not None else plan.describe()}"]
    return head, found


def _where(fn):
    """``ncudnn/kernels/...py:LINE`` of a function defined in the package (an absolute path elsewhere)."""
    path = os.path.abspath(fn.__code__.co_filename)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the directory holding ncudnn/
    if path.startswith(root + os.sep):
        path = os.path.relpath(path, os.path.dirname(root))
    return f"{path}:{fn.__code__.co_firstlineno}"


def format_kernels(head, found):
    out = [f"# {line}" for line in head]
    if not found:
        out.append("# (the build compiled no kernel)")
    unique, seen_src = {}, {}
    for key, dispatcher in found:  # a kernel fetched twice (e.g. two launches of one step) prints once
        unique.setdefault(id(dispatcher), (key, dispatcher))
    found = list(unique.values())
    for i, (key, dispatcher) in enumerate(found, 1):
        fn = capture.python_function(dispatcher)
        name = fn.__name__ if fn is not None else type(dispatcher).__name__
        out += ["", "# " + "=" * 100, f"# kernel {i}/{len(found)}: {name}", f"# cache key: {key}"]
        if fn is None:
            out.append(f"# (no Python function behind {dispatcher!r})")
            continue
        consts = capture.constants(fn)
        if consts:
            out.append("# constants: " + ", ".join(f"{k}={v!r}" for k, v in consts.items()))
        kind, text = capture.source_of(fn)
        if kind == "generated":
            label = fn.__code__.co_filename
            out.append(f"# generated source ({label if len(label) <= 100 else label[:97] + '...'})")
            if text in seen_src:
                out.append(f"# (the same generated module as kernel {seen_src[text]})")
                continue
            seen_src[text] = i
        elif kind == "defined":
            out.append(f"# defined at {_where(fn)}")
        else:
            out.append(f"# {text}")
            continue
        out += ["# " + "=" * 100, text.rstrip("\n")]
        for helper, src in capture.generated_helpers(fn):
            if src in seen_src:
                out += ["", f"# ---- device function {helper} of {name}: in the generated module of kernel "
                        f"{seen_src[src]}"]
                continue
            seen_src[src] = i
            out += ["", f"# ---- device function {helper} of {name}: generated source", src.rstrip("\n")]
    return "\n".join(out) + "\n"


def list_engines():
    """Every registered engine with its default problem and knobs, then the problems."""
    from ..engines import api, registry

    ctx = _context(False)
    out = ["engines (knobs as on the engine's default problem):"]
    for eng in registry.engines():
        try:
            prob, dt, g = _problem_graph(eng, None, None, ctx)
        except ShowError as e:
            out.append(f"  {eng.name}: {e}")
            continue
        specs = eng.knobs(api.problem(g))
        out.append(f"  {eng.name}  [problem {prob}, {dt}]")
        out += [f"      {describe_knob(s)}" for s in specs] or ["      (no knobs)"]
    out.append("problems: " + ", ".join(P.PROBLEMS))
    out.append("data types: " + ", ".join(P.DTYPES))
    return "\n".join(out) + "\n"


def _parser():
    p = argparse.ArgumentParser(prog="python -m ncudnn.kernels",
                                description="Print the generated kernel sources of an engine config.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("show", help="the kernels of ENGINE for the given knobs (see --list)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("engine", nargs="?", help="an engine name (as in ncudnn.engines.registry)")
    s.add_argument("knobs", nargs="*", metavar="KNOB=VALUE", help="knob values (default: the engine's default config)")
    s.add_argument("--list", action="store_true", help="list the engines, their knobs and the problems")
    s.add_argument("--problem", help="the representative problem to build for (default: the engine's first)")
    s.add_argument("--dtype", help="the problem's data type: " + ", ".join(P.DTYPES))
    s.add_argument("--tf32", action="store_true", help="build with TF32 allowed (FP32 on tensor cores)")
    return p


def main(argv=None, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    args = _parser().parse_args(argv)
    try:
        if args.list:
            out.write(list_engines())
            return 0
        if not args.engine:
            raise ShowError("name an engine (or --list)")
        head, found = kernels_of(args.engine, args.knobs, args.problem, args.dtype, args.tf32)
        out.write(format_kernels(head, found))
        return 0
    except ShowError as e:
        err.write(f"python -m ncudnn.kernels show: error: {e}\n")
        return USAGE_ERROR
