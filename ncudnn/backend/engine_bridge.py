"""Every call the backend descriptors make into the engine layer (``ncudnn.engines.api``), in one place.

ENGINE / ENGINECFG / ENGINEHEUR / EXECUTION_PLAN finalize and cudnnBackendExecute go through these
functions only. An engine config travels as the engine layer's ``EngineConfig``.
"""
from ..engines import api
from ..errors import CudnnError, error_for
from ..types import cudnnStatus_t as S


def global_count():
    return api.engine_count()


def graph_engines(gdesc):
    """A finalized OPERATIONGRAPH's engines in the order of its ENGINE_GLOBAL_INDEX (cuDNN's index is
    meaningful per operation graph): the engines that run the graph (:func:`support` answers SUCCESS, as
    at ENGINE finalize) first, then the rest (:func:`ncudnn.engines.api.graph_engines`). Computed on first
    use and kept in the descriptor's state."""
    order = gdesc.state.get("engines")
    if order is None:
        order = gdesc.state["engines"] = api.graph_engines(gdesc.state["graph"], gdesc.state["ctx"])
    return order


def engine_at(gdesc, index):
    """The engine at ENGINE_GLOBAL_INDEX ``index`` of the graph ``gdesc``, or None."""
    order = graph_engines(gdesc)
    return order[int(index)] if 0 <= int(index) < len(order) else None


def index_of(gdesc, engine):
    """The ENGINE_GLOBAL_INDEX of ``engine`` in the graph ``gdesc``."""
    return graph_engines(gdesc).index(engine)


def context(handle):
    return api.context(handle)


def support(graph, engine_or_config, ctx):
    """(status, reason): can the engine (an Engine) or EngineConfig run the whole graph?

    An engine first answers for the graph's problem itself (the cheap pattern check), so engines are
    never asked to price a problem they do not accept."""
    if not hasattr(engine_or_config, "config"):
        engine = engine_or_config
        sub = api.problem(graph)
        if engine.name != "composite" and type(sub).__name__ != "CompositeSub":
            status, reason = engine.check_support(sub, ctx)
            if int(status) != int(S.CUDNN_STATUS_SUCCESS):
                return S(int(status)), reason
        engine_or_config = engine.name
    status, reason = api.check_support(graph, engine_or_config, ctx)
    return S(int(status)), reason


def knobs(engine, graph):
    try:
        return tuple(engine.knobs(api.problem(graph)))
    except (AttributeError, TypeError):
        return ()


def engine_config(engine, graph, ctx, config=None):
    """The EngineConfig (notes, exact workspace) of ``engine`` with ``config`` (default knobs if None)."""
    d = {"engine": engine.name}
    if config is not None:
        d["config"] = config.to_json()
    return api.engine_config_from_json(d, graph, ctx)


def default_config(engine, graph):
    return engine.default_config(api.problem(graph))


def heuristics(graph, mode, ctx):
    return list(api.get_heuristics(graph, mode, ctx))


def build_plan(graph, ec, ctx):
    return api.build_plan(graph, ec, ctx)


def plan_to_json(plan):
    return api.plan_to_json(plan)


def plan_from_json(text, ctx):
    """The plan a JSON representation describes; a document of the wrong shape is BAD_PARAM."""
    try:
        return api.plan_from_json(text, ctx)
    except CudnnError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as e:
        raise error_for(S.CUDNN_STATUS_BAD_PARAM, f"malformed plan JSON ({type(e).__name__}: {e})") from None


def execute(plan, pack, workspace, handle):
    api.execute(plan, pack, workspace, handle=handle)
