"""cudnnBackendExecute and the native CUDA graph hooks: a finalized plan run on a variant pack.

The variant pack's uid -> pointer map goes to the plan as is (the engine layer checks each buffer
against its tensor: NULL, alignment, size, and a self-describing buffer's dtype / shape / strides);
a by-value tensor's data pointer is a host pointer to its value (or a ctypes object, NumPy scalar or
float holding it, see ncudnn.host_values), read with the tensor's data type at every execute.
"""
import numpy as np

from ..errors import CudnnError, error_for
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnStatus_t as S
from . import engine_bridge as bridge
from .machinery import check_descriptor
from .report import fail


def checked_pair(plan, pack):
    for d, dtype, what in ((plan, D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "executionPlan"),
                           (pack, D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variantPack")):
        check_descriptor(d, what)
        if d.type != dtype:
            fail(S.CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, d, None, f"{what} must be a {dtype.name}")
        if not d.finalized:
            fail(S.CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, d, None, f"{what} is not finalized")
    return plan, pack


def _reader(pack, obj, t):
    """A function reading by-value tensor ``t``'s value from ``obj``, its variant-pack data pointer (a
    host pointer, a ctypes object, a NumPy scalar or array, a float: see ncudnn.host_values). A host
    pointer is read at every execute, as cuDNN does; the form is checked when the pack is bound."""
    from ..host_values import host_value
    from ..ir import numpy_dtype
    from ..errors import BadParamError
    dt = numpy_dtype(t.dtype) or np.dtype(np.float32)
    what = f"by-value {t.label}"

    def read():
        try:
            return host_value(obj, dt, what)
        except BadParamError as e:
            fail(e.status, pack, None, e.message)
    read()
    return read


def variant_map(plan, pack):
    """(uid -> buffer for every non-virtual tensor of the plan, uid -> reader of each by-value tensor)."""
    tensors = plan.state["graph"].tensors()
    given = pack.state["buffers"]
    extra = sorted(u for u in given if u not in tensors or tensors[u].is_virtual)
    if extra:
        fail(S.CUDNN_STATUS_BAD_PARAM, pack, None, f"unique id(s) {extra} are not non-virtual tensors of the "
             "plan's operation graph")
    out, readers = {}, {}
    for uid, t in sorted(tensors.items()):
        if t.is_virtual:
            continue
        if uid not in given:
            fail(S.CUDNN_STATUS_BAD_PARAM, pack, None, f"no data pointer for {t.label}")
        if t.is_by_value:
            readers[uid] = _reader(pack, given[uid], t)
        else:
            out[uid] = given[uid]
    return out, readers


def workspace_of(plan, pack):
    size = int(plan.state["plan"].workspace_size)
    ws = pack.state["workspace"]
    if size and (ws is None or (isinstance(ws, int) and ws == 0)):
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, pack, None, f"the plan needs {size} bytes of workspace, "
             "CUDNN_ATTR_VARIANT_PACK_WORKSPACE is NULL")
    return ws if size else None


def bound(plan, pack):
    """(buffers, workspace) of ``pack`` for ``plan``, checked once per (plan, pack): both are immutable
    once finalized, so repeated executions skip the uid checks."""
    key = (id(plan), id(plan.state["plan"]))
    hit = pack.state.get("bound")
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    (buffers, readers), workspace = variant_map(plan, pack), workspace_of(plan, pack)
    pack.state["bound"] = (key, (buffers, readers), workspace)
    return (buffers, readers), workspace


def _buffers(bound_buffers):
    """The pack for one execute: the device buffers and each by-value tensor's value read now."""
    buffers, readers = bound_buffers
    out = dict(buffers)
    for uid, read in readers.items():
        out[uid] = read()
    return out


def execute(handle, plan, pack):
    from ..handle import get_handle_or_raise
    h = get_handle_or_raise(handle)
    checked_pair(plan, pack)
    buffers, workspace = bound(plan, pack)
    try:
        bridge.execute(plan.state["plan"], _buffers(buffers), workspace, h)
    except CudnnError as e:
        fail(e.status, pack, None, e.message)
    except Exception as e:  # noqa: BLE001 - a launch failure is EXECUTION_FAILED with its text
        raise error_for(S.CUDNN_STATUS_EXECUTION_FAILED, f"{plan.state['plan'].describe()}: "
                        f"{type(e).__name__}: {e}") from None


def cuda_graph(handle, plan, pack, graph, update):
    """Populate / update a native CUDA graph with the plan's kernels (the engine layer records them;
    it answers NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API where it cannot, e.g. in the simulator)."""
    from ..handle import get_handle_or_raise
    h = get_handle_or_raise(handle)
    checked_pair(plan, pack)
    if graph is None:
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, None, None, "cudaGraph is NULL")
    ec, built = plan.state["ec"], plan.state["plan"]
    hook = getattr(built, "update_cuda_graph" if update else "populate_cuda_graph", None)
    if hook is None:
        name = f"engine {ec.engine.global_index} ({ec.engine.name})" if ec is not None else "this plan's engine"
        fail(S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API, plan, None,
             f"{name} does not support the native CUDA graph API (no CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API)")
    buffers, workspace = bound(plan, pack)
    try:
        hook(graph, _buffers(buffers), workspace, h)
    except CudnnError as e:
        fail(e.status, plan, None, e.message)
