"""The one entry point front ends use: heuristics, support checks, plan building, execution,
autotuning and plan serialization, over a finalized :class:`~ncudnn.ir.OpGraph`.

Graph-level engines: a graph that partitions into one subgraph is offered every engine whose
``check_support`` accepts that subgraph; a graph of several subgraphs is offered the ``composite``
engine, which runs each subgraph on its own best engine.

    ecs = get_heuristics(graph, CUDNN_HEUR_MODE_A)        # ranked EngineConfigs
    plan = build_plan(graph, ecs[0])                       # cached per (graph, config)
    execute(plan, {uid: tensor_or_pointer, ...}, workspace)

``ctx`` everywhere is a :class:`BuildContext`, a handle (its device and caches), or None.
"""
import gc
import math
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from functools import cached_property

from ..errors import CudnnError, InternalError, NotSupportedError, error_for
from ..ir.partition import partition
from ..types import cudnnBackendHeurMode_t, cudnnStatus_t
from . import autotune as _tune
from . import heuristics, registry
from . import serialize as _serialize
from .base import OK, BuildContext, Config, context
from .composite import CompositeSub, fallback_problem, make_composite
from .plan import ExecutionPlan, layout
from .plancache import cache_for, graph_key, plan_key
from .ranking import (_MODES, EngineConfig, _ctx_flags, config_status, engine_config, log, log_enabled, rank_subgraph,
                      refusal, support)

S = cudnnStatus_t
HM = cudnnBackendHeurMode_t

__all__ = ["EngineConfig", "BuildContext", "context", "get_heuristics", "supported_engines", "check_support",
           "build_plan", "execute", "autotune", "plan_to_json", "plan_from_json", "engine_config_from_json",
           "problem", "explain_unsupported", "engine_count", "graph_engines", "resample_bwd_from_x"]


# ---------------------------------------------------------------------------------- problems

def problem(graph):
    """The graph's engine problem (cached on the graph): its single Subgraph, or a CompositeSub."""
    sub = graph.__dict__.get("_engine_problem")
    if sub is None:
        if not graph.finalized:
            graph.finalize()
        parts, materialize = partition(graph)
        sub = parts[0] if len(parts) == 1 else make_composite(graph, parts, materialize)
        graph.__dict__["_engine_problem"] = sub
    return sub


class _LRU:
    """A bounded least-recently-used map (rankings by problem signature)."""

    def __init__(self, size):
        self.size, self.d, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            v = self.d.get(key)
            if v is not None:
                self.d.move_to_end(key)
            return v

    def put(self, key, value):
        with self.lock:
            self.d[key] = value
            if len(self.d) > self.size:
                self.d.popitem(last=False)
        return value

    def clear(self):
        with self.lock:
            self.d.clear()


#: rankings by (problem signature, mode, context flags, generations): another graph object of the same
#: problem is answered from here
_RANKED = _LRU(512)


def _value(v):
    return tuple(v) if isinstance(v, list) else v


def problem_signature(graph):
    """A hashable signature of what a ranking depends on: per node its op, attribute values and, per
    port, the tensor (numbered by first use, not by uid) with its dtype, dims, strides, flags and
    by-value scalar. Two graphs of one signature get the same ranking (cheaper than ``graph.key()``:
    no JSON, no SHA-1)."""
    rank = {}
    out = []
    for node in graph.nodes:
        ports = []
        for table in (node.inputs, node.outputs):
            for port in sorted(table):
                t = table[port]
                ports.append((port, rank.setdefault(t.uid, len(rank)), t.dtype, t.dims, t.strides, t.is_virtual,
                              t.is_by_value, t.alignment, t.vector_count, t.vectorized_dim, t.reordering,
                              t.ragged_offset is not None, _value(t.value) if t.is_by_value else None))
        attrs = [getattr(node, k) for k in node.ATTRS]
        out.append((node.OP, tuple([tuple(v) if isinstance(v, list) else v for v in attrs]), tuple(ports)))
    return tuple(out)


def forget_rankings():
    """Drop the rankings remembered by problem signature (tests)."""
    _RANKED.clear()


# ------------------------------------------------------------------------------- heuristics

def get_heuristics(graph, mode=HM.CUDNN_HEUR_MODE_A, ctx=None):
    """Supported EngineConfigs for ``graph``, best first, under heuristic ``mode``.

    INSTANT / A: the analytic model; B: the model corrected by this device's autotuning records, with
    an autotuned winner for this graph (if one is stored) first; FALLBACK: fallback engines only.
    """
    t0 = time.perf_counter()
    ctx = context(ctx)
    m = _MODES.get(mode)
    mode = HM(int(mode)) if m is None else m
    if mode == HM.CUDNN_HEUR_MODES_COUNT:
        raise error_for(S.CUDNN_STATUS_BAD_PARAM, "CUDNN_HEUR_MODES_COUNT is not a heuristic mode")
    # mode B looks timings up by graph key; the model's modes need no key (it costs ~0.1 ms)
    key = graph_key(graph) if mode == HM.CUDNN_HEUR_MODE_B else None
    explain = [] if log_enabled() else None
    memo = graph.__dict__.setdefault("_rankings", {})
    memo_key = (mode, _ctx_flags(ctx), heuristics.generation, registry.fingerprint())
    hit = memo.get(memo_key)
    sig = None
    if hit is None:
        if not graph.finalized:
            graph.finalize()
        try:
            sig = (problem_signature(graph), memo_key)
            hit = _RANKED.get(sig)
        except TypeError:  # an unhashable attribute value: the JSON key of the graph instead
            sig = (graph.key(dynamic=False), memo_key)
            hit = _RANKED.get(sig)
        if hit is not None:
            memo[memo_key] = hit
    if hit is not None:
        if explain is not None:
            log(f"heuristics {mode.name} for graph {graph.name or 'unnamed'}: {len(hit)} config(s), as ranked "
                "before for this problem:\n"
                + "\n".join(f"  {ec.predicted_time * 1e6:10.2f} us  {ec}  ({ec.why})" for ec in hit))
        return list(hit)
    collect = gc.isenabled()     # no collector pause inside one ranking (its garbage is a few objects)
    if collect:
        gc.disable()
    try:
        sub = problem(graph)
        if isinstance(sub, CompositeSub):
            # an engine that takes the whole multi-part problem as one kernel first (e.g. matmul_tc's FP8 matmul
            # with its amax output), then the composite engine's plan of parts
            out = rank_subgraph(sub, mode, ctx, key, explain) + _rank_composite(graph, sub, mode, ctx, key, explain)
        else:
            out = rank_subgraph(sub, mode, ctx, key, explain)
            if fallback_problem(graph, sub, ctx) is not None:  # the unfused pieces after the fused plans
                out = out + _rank_composite(graph, sub, mode, ctx, key, explain)
        if mode == HM.CUDNN_HEUR_MODE_B:
            out = _winner_first(graph, out, ctx, explain)
    finally:
        if collect:
            gc.enable()
    memo[memo_key] = _RANKED.put(sig, tuple(out))
    if explain is not None:
        dt = (time.perf_counter() - t0) * 1e6
        head = f"heuristics {mode.name} for graph {graph.name or 'unnamed'} ({key or '-'}) on " \
               f"{ctx.device.name}: {len(out)} config(s) in {dt:.0f} us"
        log("\n".join([head, f" problem: {sub.describe()}"] + explain))
    return out


def _csub(graph, sub, ctx):
    """The composite engine's problem: the fallback partition, else the graph's one subgraph as one part."""
    return fallback_problem(graph, sub, ctx) or make_composite(graph, [sub], ())


def _rank_composite(graph, sub, mode, ctx, key, explain):
    comp = registry.by_name("composite")
    sub = _csub(graph, sub, ctx)
    st, why = comp.check_support(sub, ctx)
    if st != S.CUDNN_STATUS_SUCCESS:
        if explain is not None:
            explain.append(f"  composite: {S(st).name}: {why}")
        return []
    parts = comp.choose_parts(sub, mode, ctx, key, explain)
    return [_composite_config(graph, sub, parts)]


def _composite_config(graph, sub, parts):
    comp = registry.by_name("composite")
    scratch = max([p.workspace_size for p in parts] + [0])
    _, _, ws = layout(graph.tensors(), sub.materialize, scratch)
    nn = tuple(dict.fromkeys(n for p in parts for n in p.numerical_notes))
    bn = tuple(n for n in comp.behavior_notes if all(n in p.behavior_notes for p in parts))
    return EngineConfig(comp, Config(comp.name, ()), nn, bn, ws, sum(p.predicted_time for p in parts),
                        tuple(parts), "sum of the parts")


def _winner_first(graph, ranked, ctx, explain):
    stored = _tune.stored_results(graph, ctx)
    if not stored:
        return ranked
    try:
        win = engine_config_from_json(stored[0]["config"], graph, ctx)
    except CudnnError:
        return ranked
    if check_support(graph, win, ctx)[0] != S.CUDNN_STATUS_SUCCESS:
        return ranked
    win = replace(win, predicted_time=stored[0]["median_ms"] * 1e-3, why="autotuned winner (measured)")
    if explain is not None:
        explain.insert(0, f"  autotuned winner first: {win} at {stored[0]['median_ms']:.4f} ms")
    return [win] + [ec for ec in ranked if ec.ident() != win.ident()]


def supported_engines(graph, ctx=None):
    """Engines that can run ``graph`` (global-index order)."""
    ctx = context(ctx)
    sub = problem(graph)
    if isinstance(sub, CompositeSub):
        comp = registry.by_name("composite")
        whole = [e for e in registry.engines() if _whole(e) and support(e, sub, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
        return whole + ([comp] if comp.check_support(_csub(graph, sub, ctx), ctx)[0] == S.CUDNN_STATUS_SUCCESS else [])
    out = [e for e in registry.engines() if e.name != "composite" and support(e, sub, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
    fb = fallback_problem(graph, sub, ctx)
    if fb is not None and registry.by_name("composite").check_support(fb, ctx)[0] == S.CUDNN_STATUS_SUCCESS:
        out.append(registry.by_name("composite"))
    return out


def _as_engine_config(graph, ec, ctx):
    """An EngineConfig from an EngineConfig, a Config, an engine name or a global index."""
    if isinstance(ec, EngineConfig):
        return ec
    if isinstance(ec, (str, int)):
        eng = registry.get(ec) if isinstance(ec, str) else registry.by_index(ec)
        if eng is None:
            raise error_for(S.CUDNN_STATUS_BAD_PARAM, f"no engine {ec!r} is registered")
        sub = problem(graph)
        # an engine's knobs describe the subgraphs it accepts: an unsupported one gets the bare config
        ec = eng.default_config(sub) if _supports(eng, sub, ctx) else Config(eng.name, ())
    if isinstance(ec, Config):
        return engine_config_from_json({"engine": ec.engine, "config": ec.to_json()}, graph, ctx)
    raise error_for(S.CUDNN_STATUS_BAD_PARAM, f"{type(ec).__name__} is not an engine config")


def check_support(graph, engine_config, ctx=None):
    """(status, reason): can ``engine_config`` run ``graph``? The reason names the node and why."""
    ctx = context(ctx)
    try:
        ec = _as_engine_config(graph, engine_config, ctx)
        sub = problem(graph)
    except CudnnError as e:
        return e.status, e.message
    if ec.engine.name == "composite":
        csub = _csub(graph, sub, ctx)
        st, why = ec.engine.check_support(csub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS or not ec.parts:
            return S(st), why
        if len(ec.parts) != len(csub.parts):
            return S.CUDNN_STATUS_BAD_PARAM, f"composite config has {len(ec.parts)} parts, the graph " \
                f"partitions into {len(csub.parts)}"
        for part, pec in zip(csub.parts, ec.parts):
            st, why = config_status(pec.engine, part, pec.config, ctx)
            if st != S.CUDNN_STATUS_SUCCESS:
                return st, why
        return OK
    if isinstance(sub, CompositeSub) and not _whole(ec.engine):
        return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, \
            f"{ec.engine.name}: the graph partitions into {len(sub.parts)} subgraphs ({sub.describe()}); " \
            "only the composite engine runs it"
    return config_status(ec.engine, sub, ec.config, ctx)


def _whole(eng):
    """Does ``eng`` (not the composite engine) take multi-part problems whole (its kinds name "composite")?"""
    return eng.name != "composite" and "composite" in eng.kinds


def explain_unsupported(graph, ctx=None):
    """Why no engine runs ``graph``: an :class:`Unsupported` with the engines' reasons, in the two shapes the
    front ends report (``status`` / ``by_engine``: pygraph; ``by_part``: the legacy calls)."""
    return Unsupported(graph, context(ctx))


class Unsupported:
    """The engines' reasons for refusing one graph (each computed on first use).

    ``status`` and ``by_engine``: every registered engine's refusal of the whole graph (its default config),
    summarized as :func:`ncudnn.engines.ranking.refusal` does (the engines that accept the pattern first and
    their status when they agree), as ``"Engines: name: STATUS: reason; ..."`` ("" and NOT_SUPPORTED when
    no engine refuses). ``by_part``: each part of the graph's partition that no engine runs, with its op, the
    registered engines and each one's reason, parts separated by " | "."""

    def __init__(self, graph, ctx):
        self.graph, self.ctx = graph, ctx

    @cached_property
    def _by_engine(self):
        reasons = []
        for eng in registry.engines():
            st, why = check_support(self.graph, eng.name, self.ctx)
            if int(st) != 0:
                reasons.append((int(st), f"{eng.name}: {S(int(st)).name}: {why}"))
        if not reasons:
            return S.CUDNN_STATUS_NOT_SUPPORTED, ""
        status, reasons = refusal(reasons)
        return status, "Engines: " + "; ".join(w for _, w in reasons)

    @property
    def status(self):
        return self._by_engine[0]

    @property
    def by_engine(self):
        return self._by_engine[1]

    @cached_property
    def by_part(self):
        sub = problem(self.graph)
        parts = sub.parts if isinstance(sub, CompositeSub) else [sub]
        names = [e.name for e in registry.engines() if e.name != "composite"]
        lines = []
        for part in parts:
            reasons = []
            for eng in registry.engines():
                if eng.name == "composite":
                    continue
                st, why = support(eng, part, self.ctx)
                if st == S.CUDNN_STATUS_SUCCESS:
                    break
                reasons.append(why.split(": ", 1)[-1] if why else S(st).name)
            else:
                ops = sorted({n.OP for n in part.nodes})
                lines.append(f"no engine runs the {part.kind} subgraph {part.describe()} (op {', '.join(ops)}; "
                             f"registered engines: {', '.join(names)}): " + "; ".join(reasons))
        return " | ".join(lines) or f"no engine config accepts {sub.describe()} under these math settings"


# ---------------------------------------------------------------------------------- engines

def engine_count():
    """Engine indices of a graph (the backend's OPERATIONGRAPH_ENGINE_GLOBAL_COUNT): every engine given an
    index, landed or not."""
    return registry.global_count()


def graph_engines(graph, ctx=None):
    """The engines in the order of ``graph``'s engine indices (as in cuDNN, an ENGINE_GLOBAL_INDEX is
    meaningful per operation graph): those that run the graph with their default config first, in
    global-index order, then every other registered engine (whose indices refuse with its reason)."""
    ctx = context(ctx)
    supported = [e for e in registry.engines() if check_support(graph, e.name, ctx)[0] == S.CUDNN_STATUS_SUCCESS]
    return registry.graph_order(supported)


def resample_bwd_from_x(mode, padding_mode, pre_padding, window, stride):
    """(ok, reason): does a resample backward of this geometry run without IDX, the window winners
    recomputed from X (the resample engine's gather)? The legacy max-pooling backward asks before it lowers,
    to leave out the forward that would write IDX."""
    eng = registry.get("resample")
    if eng is None:
        return False, "the resample engine is not loaded"
    return eng.recomputes_from_x(mode, padding_mode, pre_padding, window, stride)


# ----------------------------------------------------------------------------------- plans

def build_plan(graph, engine_config, ctx=None):
    """The ExecutionPlan of ``engine_config`` on ``graph``: from the plan cache, else built (kernels
    compiled, launch arguments prepared). Raises CudnnError with the status of an unsupported config."""
    ctx = context(ctx)
    ec = _as_engine_config(graph, engine_config, ctx)
    key = plan_key(graph, ec, _ctx_flags(ctx))
    cache = cache_for(ctx.handle)
    plan = cache.get(key)
    if plan is not None:
        return plan.for_graph(graph)
    info = log_enabled()
    t0 = time.perf_counter()
    st, why = check_support(graph, ec, ctx)
    if st != S.CUDNN_STATUS_SUCCESS:
        raise error_for(st, why)
    sub = problem(graph)
    if info:
        log(f"build plan 1/3 CHECK SUPPORT: {ec} accepts {sub.describe()}")
    if ec.engine.name == "composite":
        csub = _csub(graph, sub, ctx)
        parts = ec.parts or ec.engine.choose_parts(csub, HM.CUDNN_HEUR_MODE_A, ctx, graph_key(graph))
        if not ec.parts:
            ec = _composite_config(graph, csub, parts)
        subplans = [_build_one(p.engine, s, p.config, ctx, i, info) for i, (s, p) in
                    enumerate(zip(csub.parts, parts))]
        materialize = csub.materialize
    else:
        subplans = [_build_one(ec.engine, sub, ec.config, ctx, 0, info)]
        materialize = ()
    plan = ExecutionPlan(graph, subplans, materialize, ec)
    if info:
        log(f"build plan 3/3 PLAN READY: {plan.describe()}; workspace {plan.workspace_size} B; "
            f"{(time.perf_counter() - t0) * 1e3:.2f} ms")
    cache.put(key, plan)
    return plan


def _build_one(engine, sub, cfg, ctx, i, info):
    if info:
        log(f"build plan 2/3 BUILD part {i}: {sub.describe()} on {cfg}")
    try:
        sp = engine.build(sub, cfg, ctx)
    except CudnnError:
        raise
    except Exception as e:
        raise InternalError(f"{engine.name}: building {sub.describe()} failed: {type(e).__name__}: {e}",
                            S.CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED) from e
    expect = engine.workspace_size(sub, cfg)
    if sp.workspace_size != expect:
        raise InternalError(f"{engine.name}: built plan wants {sp.workspace_size} B of workspace, "
                            f"workspace_size() said {expect}")
    return sp


def execute(plan, variant_pack, workspace=None, handle=None, stream=None):
    """Run ``plan``: ``variant_pack`` maps uid -> device pointer int or array object (torch / CuPy /
    numba / __cuda_array_interface__ / DLPack) and by-value uids -> scalars; ``workspace`` likewise
    (too small -> BAD_PARAM_SIZE_INSUFFICIENT). The stream: ``stream``, else the handle's, else 0."""
    if stream is None and handle is not None:
        stream = handle.stream
    plan.execute(variant_pack, workspace, stream or 0)


# ------------------------------------------------------------------------- configs from JSON

def engine_config_from_json(d, graph, ctx=None):
    """An EngineConfig from ``EngineConfig.to_json()`` output, sized and noted for ``graph``."""
    ctx = context(ctx)
    try:
        eng = registry.by_name(d["engine"])
        cfg = Config.from_json(d["config"]) if "config" in d else Config(eng.name, ())
    except KeyError as e:
        raise NotSupportedError(f"unknown engine or knob {e} in {d}", S.CUDNN_STATUS_NOT_SUPPORTED) from None
    sub = problem(graph)
    if eng.name != "composite":
        if isinstance(sub, CompositeSub) and not _whole(eng):
            raise error_for(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                            f"{eng.name} cannot run a graph of {len(sub.parts)} subgraphs")
        return _given(eng, sub, cfg, ctx)
    csub = _csub(graph, sub, ctx)
    rows = d.get("parts") or []
    if rows and len(rows) != len(csub.parts):
        raise error_for(S.CUDNN_STATUS_BAD_PARAM, f"{len(rows)} parts given, the graph has {len(csub.parts)}")
    parts = []
    for part, row in zip(csub.parts, rows):
        try:
            e = registry.by_name(row["engine"])
            c = Config.from_json(row["config"])
        except KeyError as err:
            raise NotSupportedError(f"unknown engine or knob {err}", S.CUDNN_STATUS_NOT_SUPPORTED) from None
        parts.append(_given(e, part, c, ctx))
    if not parts:
        parts = list(eng.choose_parts(csub, HM.CUDNN_HEUR_MODE_A, ctx))
    return _composite_config(graph, csub, parts)


def _supports(eng, sub, ctx):
    if isinstance(sub, CompositeSub) and not _whole(eng):
        return False
    return eng.name == "composite" or support(eng, sub, ctx)[0] == S.CUDNN_STATUS_SUCCESS


def _given(eng, sub, cfg, ctx):
    """The EngineConfig of a given ``cfg``: sized, noted and costed only where ``eng`` supports ``sub``
    (an engine's cost model, workspace and notes assume a subgraph it accepts); otherwise a bare one,
    which check_support and build_plan refuse with the engine's own status and reason."""
    if not _supports(eng, sub, ctx):
        return EngineConfig(eng, cfg, (), tuple(eng.behavior_notes), 0, math.inf, (), "unsupported")
    return engine_config(eng, sub, cfg, ctx, eng.cost(sub, cfg, ctx.device), "given")


# ------------------------------------------------------------------------------- autotuning

def autotune(graph, configs, variant_pack, workspace=None, ctx=None, runs=None, warmup=None, reuse=True,
             store=True, budget_s=None):
    """Time each supported config of ``configs`` (EngineConfigs; None: every mode-A config) on
    ``variant_pack`` / ``workspace``. Returns ``[TuneResult(engine_config, median_ms), ...]``,
    fastest first; unsupported configs, and those whose workspace does not fit, are left out.
    ``runs``: timed reps per config (default: as many as ``budget_s`` allows, see
    :func:`ncudnn.engines.autotune.measure`); ``warmup``: untimed runs after the first (default 1);
    ``budget_s``: timed seconds for the whole call, split evenly over the configs (default
    ``CONFIG_BUDGET_S`` per config). ``reuse``: answer from the store when every config was timed before;
    ``store``: remember the results (mode B ranks by them)."""
    ctx = context(ctx)
    if configs is None:
        configs = get_heuristics(graph, HM.CUDNN_HEUR_MODE_A, ctx)
    configs = [_as_engine_config(graph, c, ctx) for c in configs]
    if reuse:
        hit = _tune.reused(graph, configs, ctx)
        if hit is not None:
            return hit
    bench = _tune.Bench(graph, variant_pack, workspace, ctx, len(configs), runs, warmup, budget_s)
    results = []
    try:
        for i, ec in enumerate(configs):
            bench.update(i, str(ec))
            if check_support(graph, ec, ctx)[0] != S.CUDNN_STATUS_SUCCESS:
                continue
            try:
                plan = build_plan(graph, ec, ctx)
            except CudnnError:
                continue
            r = bench.time(ec, plan)
            if r is not None:
                results.append(r)
                bench.update(i + 1, str(ec))
    finally:
        bench.close()
    results.sort(key=lambda r: r[1])
    if store and results:
        _tune.record(ctx, graph_key(graph), results)
    return results


# ---------------------------------------------------------------------------- serialization

def plan_to_json(plan):
    """JSON text of a built plan (:func:`ncudnn.engines.serialize.plan_to_json`)."""
    return _serialize.plan_to_json(plan)


def plan_from_json(text, ctx=None):
    """The plan of :func:`plan_to_json` text, built with its recorded engine config (no heuristics run)."""
    graph, d = _serialize.read_plan(text)
    ec = engine_config_from_json(d["engine_config"], graph, ctx)
    plan = build_plan(graph, ec, ctx)
    if plan.workspace_size != d.get("workspace_size", plan.workspace_size):
        raise CudnnError(f"rebuilt plan needs {plan.workspace_size} B of workspace, recorded "
                         f"{d['workspace_size']}", S.CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    return plan
