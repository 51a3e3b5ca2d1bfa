"""Shape overrides at execute (``override_uids / override_shapes / override_strides``).

A graph built with ``is_override_shape_enabled=True`` (or ``is_dynamic_shape_enabled=True``) runs other
shapes of the same graph: the overridden tensors take the new dims / strides, the virtual tensors are
inferred again, and the plan's engine config (same engine, same knobs: no heuristics run) is built for
the new shapes, once per distinct override (kept on the graph; kernels come from the kernel cache).
An engine config that cannot run the new shapes raises cudnnGraphNotSupportedError with its reason.
Without either flag, an override that changes a shape is refused, saying how to enable it.
"""
from ..engines import api
from ..errors import CudnnError
from ..types import cudnnStatus_t
from .errors import graph_error, reraise
from .tensor import _ints

S = cudnnStatus_t
KEPT = 32  # specialized plans kept per graph


def _normalized(graph, uids, shapes, strides):
    rows = []
    for n, uid in enumerate(uids):
        t = graph.query_tensor_attributes_of_uid(uid)
        shape = list(_ints(shapes[n], "override_shapes", t.desc)) if shapes is not None and len(shapes) > n \
            else t.get_dim()
        stride = list(_ints(strides[n], "override_strides", t.desc)) if strides is not None and len(strides) > n \
            and strides[n] is not None and len(strides[n]) else t.get_stride()
        rows.append((int(uid), tuple(shape), tuple(stride)))
    return tuple(rows)


def specialized(graph, index, uids, shapes, strides, handle=None):
    """(IR graph, plan) of plan ``index`` for the overridden shapes; (None, None) when nothing changes."""
    rows = _normalized(graph, uids, shapes, strides)
    changed = [(uid, sh, st) for uid, sh, st in rows
               if list(sh) != graph.query_tensor_attributes_of_uid(uid).get_dim()
               or list(st) != graph.query_tensor_attributes_of_uid(uid).get_stride()]
    if not changed:
        return None, None
    if not (graph.is_override_shape_enabled or graph.is_dynamic_shape_enabled):
        uid, sh, st = changed[0]
        t = graph.query_tensor_attributes_of_uid(uid)
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED,
                          f"graph '{graph.name}': tensor '{t.get_name()}' (uid {uid}) was built with dims "
                          f"{t.get_dim()} strides {t.get_stride()}, the override gives {list(sh)} / {list(st)}: "
                          "create the pygraph with is_override_shape_enabled=True to run other shapes, or build "
                          "the graph again with the new shape")
    cache = graph.__dict__.setdefault("_override_plans", {})
    key = (index, rows)
    hit = cache.get(key)
    if hit is not None:
        return hit
    clone = type(graph)()   # a pygraph of the same class, rebuilt from the graph's JSON
    clone._replay(graph.to_json())
    for uid, sh, st in rows:
        t = clone.query_tensor_attributes_of_uid(uid)
        t.set_dim(list(sh)).set_stride(list(st))
    clone.validate()
    ec_json = graph._candidates[index].to_json()
    ctx = api.context(handle if handle is not None else graph.handle)
    try:
        ec = api.engine_config_from_json(ec_json, clone.ir, ctx)
        st, why = api.check_support(clone.ir, ec, ctx)
    except CudnnError as e:
        raise reraise(e, f"graph '{graph.name}' shape override") from None
    if int(st) != 0:
        raise graph_error(st, f"graph '{graph.name}': plan {index} ({graph._candidates[index]}) cannot run the "
                          f"overridden shapes {[(u, list(s)) for u, s, _ in rows]}: {why}; build the graph "
                          "again for these shapes")
    try:
        plan = api.build_plan(clone.ir, ec, ctx)
    except CudnnError as e:
        raise reraise(e, f"graph '{graph.name}' shape override") from None
    if len(cache) >= KEPT:
        cache.pop(next(iter(cache)))
    cache[key] = (clone.ir, plan)
    return clone.ir, plan
