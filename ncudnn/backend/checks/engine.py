"""Finalize of OPERATIONGRAPH, ENGINE, ENGINECFG and ENGINEHEUR descriptors.

OPERATIONGRAPH lowers its operations to an ``ncudnn.ir.OpGraph`` (``lower.py``); the others ask the
engine layer (``engine_bridge.py``) and keep what it answers in ``state``: the engine, the graph,
the build context and, for configs, the engine layer's ``EngineConfig``. An ENGINE or ENGINEHEUR with a
DEVICEPROP set checks support and ranks for that device's properties (``deviceprop.py``).
"""
from ...errors import CudnnError
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnBackendKnobType_t as K
from ...types import cudnnStatus_t as S
from .. import engine_bridge as bridge
from ..filled import make_filled, set_readonly as _set_ro
from ..lower import lower_operation_graph
from ..report import bad, fail, unsupported
from ..values import to_handle
from .deviceprop import device_context


def _handle_ok(d, name):
    try:
        to_handle(d.value(name))
    except CudnnError as e:
        bad(d, name, f"not a valid cuDNN handle: {e.message}")


def _check_sm_target(d, name, ctx):
    sm = d.value(name)
    limit = getattr(getattr(ctx, "device", None), "sm_count", None)
    if sm < 0 or (limit is not None and sm > limit):
        bad(d, name, f"{sm} is outside [0, {limit if limit is not None else 'the SM count'}] (0: all SMs)")


def finalize_operation_graph(d):
    _handle_ok(d, A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE)
    ops = d.values(A.CUDNN_ATTR_OPERATIONGRAPH_OPS)
    if len(set(id(o) for o in ops)) != len(ops):
        fail(S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, d, A.CUDNN_ATTR_OPERATIONGRAPH_OPS,
             "the same operation descriptor is listed twice")
    d.state["graph"] = lower_operation_graph(d)
    d.state["engine_count"] = bridge.global_count()
    d.state["ctx"] = bridge.context(d.value(A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE))
    _set_ro(d, A.CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, [d.state["engine_count"]])


def _fill_engine(d, gdesc, engine, ec, ctx):
    """State and read-only attributes of a finalized ENGINE descriptor."""
    graph = gdesc.state["graph"]
    specs = bridge.knobs(engine, graph)
    d.state.update(engine=engine, graph=graph, graph_desc=gdesc, ctx=ctx, knobs=specs,
                   default_ec=ec)
    infos = [make_filled(D.CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, {
        A.CUDNN_ATTR_KNOB_INFO_TYPE: K(int(k.type)), A.CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE: k.min,
        A.CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE: k.max, A.CUDNN_ATTR_KNOB_INFO_STRIDE: k.stride}) for k in specs]
    layouts = []
    if getattr(engine, "preferred_layout", None) is not None:
        for uid, t in sorted(graph.tensors().items()):
            if not t.is_virtual and not t.is_by_value:
                layouts.append(make_filled(D.CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR, {
                    A.CUDNN_ATTR_LAYOUT_INFO_TENSOR_UID: uid, A.CUDNN_ATTR_LAYOUT_INFO_TYPES: [engine.preferred_layout]}))
    _set_ro(d, A.CUDNN_ATTR_ENGINE_KNOB_INFO, infos)
    _set_ro(d, A.CUDNN_ATTR_ENGINE_LAYOUT_INFO, layouts)
    _set_ro(d, A.CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, ec.numerical_notes)
    _set_ro(d, A.CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, ec.behavior_notes)


def finalize_engine(d):
    gdesc = d.value(A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH)
    index = d.value(A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX)
    count = gdesc.state["engine_count"]
    if not 0 <= index < count:
        unsupported(d, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                    f"{index} is outside [0, {count - 1}] (CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT is {count})")
    ctx = device_context(d, A.CUDNN_ATTR_ENGINE_DEVICEPROP, gdesc.state["ctx"])
    _check_sm_target(d, A.CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, ctx)
    engine = bridge.engine_at(gdesc, index)
    if engine is None:
        unsupported(d, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, f"engine {index} is not available in this build")
    graph = gdesc.state["graph"]
    status, reason = bridge.support(graph, engine, ctx)
    if status != S.CUDNN_STATUS_SUCCESS:
        fail(status, d, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
             f"engine {index} ({engine.name}) does not support the graph: {reason}")
    try:
        ec = bridge.engine_config(engine, graph, ctx, bridge.default_config(engine, graph))
    except CudnnError as e:
        fail(e.status, d, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX, f"engine {index} ({engine.name}): {e.message}")
    _fill_engine(d, gdesc, engine, ec, ctx)


def finalize_engine_config(d):
    edesc = d.value(A.CUDNN_ATTR_ENGINECFG_ENGINE)
    engine, graph, ctx = (edesc.state[k] for k in ("engine", "graph", "ctx"))
    specs = {int(k.type): k for k in edesc.state["knobs"]}
    choices = d.values(A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, [])
    cfg, seen = bridge.default_config(engine, graph), set()
    for choice in choices:
        ktype = choice.value(A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
        kval = choice.value(A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
        if ktype in seen:
            fail(S.CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, d, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                 f"{ktype.name} is chosen twice")
        seen.add(ktype)
        spec = specs.get(int(ktype))
        if spec is None:
            have = ", ".join(K(k).name for k in specs) or "none"
            unsupported(d, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                        f"engine {engine.name} has no knob {ktype.name} (its knobs: {have})")
        if not spec.valid(kval):
            unsupported(d, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                        f"{ktype.name} = {kval} is not in [{spec.min}, {spec.max}] step {spec.stride}")
        cfg = cfg.with_knob(ktype, kval)
    ec = d.state.get("preset_ec")  # engine configs made by the heuristics keep their own
    if ec is None:
        ec = edesc.state["default_ec"] if not choices else _config(d, engine, graph, ctx, cfg)
    status, reason = bridge.support(graph, ec, ctx)
    if status != S.CUDNN_STATUS_SUCCESS:
        fail(status, d, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, reason)
    d.state.update(engine=engine, graph=graph, ctx=ctx, ec=ec, engine_desc=edesc)
    _set_ro(d, A.CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, [int(ec.workspace_size)])


def _config(d, engine, graph, ctx, cfg):
    try:
        return bridge.engine_config(engine, graph, ctx, cfg)
    except CudnnError as e:
        fail(e.status, d, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, e.message)


def finalize_engine_heuristics(d):
    gdesc = d.value(A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
    graph = gdesc.state["graph"]
    ctx = device_context(d, A.CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, gdesc.state["ctx"])
    _check_sm_target(d, A.CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, ctx)
    try:
        ranked = bridge.heuristics(graph, d.value(A.CUDNN_ATTR_ENGINEHEUR_MODE), ctx)
    except CudnnError as e:
        fail(e.status, d, A.CUDNN_ATTR_ENGINEHEUR_MODE, e.message)
    results = []
    for ec in ranked:
        edesc = make_filled(D.CUDNN_BACKEND_ENGINE_DESCRIPTOR, {
            A.CUDNN_ATTR_ENGINE_OPERATION_GRAPH: gdesc, A.CUDNN_ATTR_ENGINE_GLOBAL_INDEX: bridge.index_of(gdesc, ec.engine)})
        default_ec = bridge.engine_config(ec.engine, graph, ctx, bridge.default_config(ec.engine, graph))
        _fill_engine(edesc, gdesc, ec.engine, default_ec, ctx)
        choices = [make_filled(D.CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, {
            A.CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE: K(int(k)), A.CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE: int(v)})
            for k, v in ec.config.knobs]
        cdesc = make_filled(D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, {
            A.CUDNN_ATTR_ENGINECFG_ENGINE: edesc, A.CUDNN_ATTR_ENGINECFG_KNOB_CHOICES: choices})
        cdesc.state["preset_ec"] = ec
        finalize_engine_config(cdesc)
        results.append(cdesc)
    d.state["results"] = results
    _set_ro(d, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, results)


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: finalize_operation_graph,
    D.CUDNN_BACKEND_ENGINE_DESCRIPTOR: finalize_engine,
    D.CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: finalize_engine_config,
    D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: finalize_engine_heuristics,
}
