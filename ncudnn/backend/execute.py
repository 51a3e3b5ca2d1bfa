"""cudnnBackendExecute and the native CUDA graph hooks: a finalized plan run on a variant pack.

The variant pack's uid -> pointer map becomes uid -> device array with each tensor's dims, strides
and data type (``ncudnn.memory`` checks NULL, alignment and size); by-value tensors become host
scalars; the workspace becomes a byte array of the plan's workspace size.
"""
import numpy as np

from ..errors import CudnnError, error_for
from ..types import cudnnBackendBehaviorNote_t as BN
from ..types import cudnnBackendDescriptorType_t as D
from ..types import cudnnStatus_t as S
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


def _scalar(obj, t):
    from ..ir import numpy_dtype
    dt = numpy_dtype(t.dtype) or np.dtype(np.float32)
    try:
        return np.asarray(obj).astype(dt).reshape(-1)[0]
    except (TypeError, ValueError, IndexError) as e:
        raise error_for(S.CUDNN_STATUS_BAD_PARAM, f"by-value {t.label}: {obj!r} is not a scalar ({e})") from None


def buffers_of(plan, pack):
    """uid -> device array (or host scalar for by-value tensors) for every tensor the plan reads or writes."""
    from .. import memory
    graph = plan.state["graph"]
    tensors = graph.tensors()
    given = pack.state["buffers"]
    extra = sorted(u for u in given if u not in tensors or tensors[u].is_virtual)
    if extra:
        fail(S.CUDNN_STATUS_BAD_PARAM, pack, None,
             f"unique id(s) {extra} are not non-virtual tensors of the plan's graph")
    out = {}
    for uid, t in sorted(tensors.items()):
        if t.is_virtual:
            continue
        if uid not in given:
            fail(S.CUDNN_STATUS_BAD_PARAM, pack, None, f"no data pointer for {t.label} (uid {uid})")
        obj = given[uid]
        if t.is_by_value:
            out[uid] = _scalar(obj, t)
            continue
        try:
            view = memory.as_view(obj, dims=t.dims, strides=t.strides, dtype=memory.DTYPE_OF.get(t.dtype),
                                  alignment=t.alignment)
            out[uid] = memory.to_numba(view)
        except CudnnError as e:
            fail(e.status, pack, None, f"data pointer of {t.label}: {e.message}")
    return out


def workspace_of(plan, pack):
    from .. import memory
    size = int(plan.state["plan"].workspace_size)
    ws = pack.state["workspace"]
    if size == 0:
        return None
    if ws is None or (isinstance(ws, int) and ws == 0):
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, pack, None, f"the plan needs {size} bytes of workspace, "
             "CUDNN_ATTR_VARIANT_PACK_WORKSPACE is NULL")
    try:
        return memory.to_numba(memory.as_view(ws, dims=(size,), strides=(1,), dtype=np.uint8, alignment=1))
    except CudnnError as e:
        fail(e.status, pack, None, f"workspace: {e.message}")


def execute(handle, plan, pack):
    from ..handle import get_handle_or_raise
    h = get_handle_or_raise(handle)
    checked_pair(plan, pack)
    buffers = buffers_of(plan, pack)
    workspace = workspace_of(plan, pack)
    try:
        plan.state["plan"].execute(buffers, workspace, h.launch_stream())
    except CudnnError:
        raise
    except Exception as e:  # noqa: BLE001 - a launch failure is EXECUTION_FAILED with its text
        raise error_for(S.CUDNN_STATUS_EXECUTION_FAILED,
                        f"{plan.state['engine'].name}: {type(e).__name__}: {e}") from None


def cuda_graph(handle, plan, pack, graph, update):
    """Populate / update a native CUDA graph: only engines with SUPPORTS_CUDA_GRAPH_NATIVE_API can."""
    from ..handle import get_handle_or_raise
    h = get_handle_or_raise(handle)
    checked_pair(plan, pack)
    if graph is None:
        fail(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, None, None, "cudaGraph is NULL")
    engine = plan.state["engine"]
    built = plan.state["plan"]
    hook = getattr(built, "update_cuda_graph" if update else "populate_cuda_graph", None)
    if BN.CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API not in engine.behavior_notes or hook is None:
        fail(S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API, plan, None,
             f"engine {engine.global_index} ({engine.name}) does not support the native CUDA graph API "
             "(no CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API)")
    hook(graph, buffers_of(plan, pack), workspace_of(plan, pack), h)
