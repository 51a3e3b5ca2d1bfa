"""Every call the backend descriptors make into the engine layer, in one place.

ENGINE / ENGINECFG / ENGINEHEUR / EXECUTION_PLAN finalize and cudnnBackendExecute go through these
functions only, so a change of the engine layer's interface is a change here.

A whole op graph runs on one engine (global index) when it partitions into one subgraph that engine
supports; a graph of several subgraphs needs an engine that accepts whole graphs
(``check_graph`` / ``build_graph``, e.g. the composite engine).
"""
from ..errors import CudnnError
from ..types import cudnnBackendHeurMode_t as H
from ..types import cudnnStatus_t as S

OK = S.CUDNN_STATUS_SUCCESS


def _registry():
    from ..engines import registry
    return registry


def global_count():
    return _registry().global_count()


def engine_at(index):
    return _registry().by_index(int(index))


def engines():
    return _registry().engines()


def build_context(handle=None):
    from ..engines.base import BuildContext
    from ..engines import device as _device

    sim = bool(getattr(handle, "simulator", False))
    try:
        dev = _device.current()
    except Exception:  # noqa: BLE001 - the cost model works without device properties
        dev = None
    return BuildContext(device=dev, simulator=sim)


def partition(graph):
    """``(subgraphs, uids to materialize)`` of a finalized IR graph (cached on the graph)."""
    cached = getattr(graph, "_backend_partition", None)
    if cached is None:
        from ..ir import partition as _partition
        cached = _partition(graph)
        graph._backend_partition = cached
    return cached


def support(engine, graph, ctx):
    """(status, reason): can ``engine`` run the whole ``graph``?"""
    subs, _ = partition(graph)
    if len(subs) == 1:
        status, reason = engine.check_support(subs[0], ctx)
        return S(int(status)), reason
    check_graph = getattr(engine, "check_graph", None)
    if check_graph is not None:
        status, reason = check_graph(graph, subs, ctx)
        return S(int(status)), reason
    kinds = ", ".join(s.kind for s in subs)
    return (S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
            f"{engine.name}: the graph splits into {len(subs)} subgraphs ({kinds}); this engine runs one")


def knobs(engine, graph):
    subs, _ = partition(graph)
    if len(subs) == 1:
        return tuple(engine.knobs(subs[0]))
    return tuple(getattr(engine, "graph_knobs", lambda g: ())(graph))


def default_config(engine, graph):
    subs, _ = partition(graph)
    if len(subs) == 1:
        return engine.default_config(subs[0])
    from ..engines.base import Config
    return Config(engine.name, ())


def keep(engine, graph, cfg, ctx):
    subs, _ = partition(graph)
    if len(subs) == 1:
        status, reason = engine.keep(subs[0], cfg, ctx)
        return S(int(status)), reason
    return OK, ""


def numerical_notes(engine, graph, cfg=None):
    subs, _ = partition(graph)
    if cfg is not None and len(subs) == 1:
        return tuple(engine.config_notes(subs[0], cfg))
    return tuple(engine.numerical_notes)


def build_plan(engine, graph, cfg, ctx):
    """An object with ``workspace_size`` and ``execute(buffers, workspace, stream)``."""
    subs, materialize = partition(graph)
    if len(subs) == 1:
        from ..engines.plan import ExecutionPlan
        sub_plan = engine.build(subs[0], cfg, ctx)
        return ExecutionPlan(graph, [sub_plan], materialize)
    build_graph = getattr(engine, "build_graph", None)
    if build_graph is None:
        raise CudnnError(f"{engine.name} cannot build a graph of {len(subs)} subgraphs",
                         S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    return build_graph(graph, cfg, ctx)


def workspace_size(engine, graph, cfg, ctx):
    """Bytes of workspace the plan of (engine, cfg) on ``graph`` needs (builds the plan)."""
    return build_plan(engine, graph, cfg, ctx).workspace_size


def heuristics(graph, mode, ctx):
    """Supported (engine, config) pairs, best first: by predicted time (modes A/B/INSTANT), or
    the fallback engines first (mode FALLBACK). Engines that reject the graph are left out."""
    ranked = []
    for eng in engines():
        status, _ = support(eng, graph, ctx)
        if status != OK:
            continue
        cfg = default_config(eng, graph)
        if keep(eng, graph, cfg, ctx)[0] != OK:
            continue
        cost = _cost(eng, graph, cfg, ctx)
        ranked.append(((0 if eng.fallback else 1) if mode == H.CUDNN_HEUR_MODE_FALLBACK else 0, cost,
                       eng.global_index, eng, cfg))
    ranked.sort(key=lambda r: r[:3])
    return [(r[3], r[4]) for r in ranked]


def _cost(engine, graph, cfg, ctx):
    subs, _ = partition(graph)
    if len(subs) != 1 or ctx.device is None:
        return 1.0
    try:
        return float(engine.cost(subs[0], cfg, ctx.device))
    except Exception:  # noqa: BLE001 - a cost model failure only affects ranking
        return float("inf")
