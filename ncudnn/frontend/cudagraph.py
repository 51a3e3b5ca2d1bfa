"""``populate_cuda_graph`` / ``update_cuda_graph``: the selected plan's kernels put into a user's CUDA
graph (a ``CUgraph`` / ``cudaGraph_t`` from cuda-python, or its integer value).

The native path, as cuDNN does it: the engine layer adds one kernel node per launch of the plan
(:meth:`ExecutionPlan.populate_cuda_graph`) and later rewrites their parameters for new buffers
(:meth:`ExecutionPlan.update_cuda_graph`); nothing runs. A plan whose engines cannot give their launches
is recorded instead by stream capture into the existing graph (``cuStreamBeginCaptureToGraph``, relaxed
mode) of one execute on a private stream, and updated by emptying the graph and capturing again. The
CUDA simulator has no graphs: both raise cudnnGraphNotSupportedError there.
"""
from ..errors import CudnnError
from ..platform import simulator_enabled
from ..types import cudnnStatus_t
from .errors import graph_error, reraise

S = cudnnStatus_t
NATIVE_REFUSED = S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API


def _graph_handle(cuda_graph):
    from cuda.bindings import driver

    if isinstance(cuda_graph, driver.CUgraph):
        return cuda_graph
    raw = int(cuda_graph)  # the handle (a CUgraph's getPtr() is the address where it is stored)
    if raw == 0:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cuda_graph is NULL")
    return driver.CUgraph(raw)


def _check(result, what):
    from cuda.bindings import driver

    err = result[0] if isinstance(result, tuple) else result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise graph_error(S.CUDNN_STATUS_EXECUTION_FAILED, f"{what} failed: {err.name}")
    return result[1:] if isinstance(result, tuple) else ()


def record(graph, handle, variant_pack, workspace, cuda_graph, update=False):
    """Put the selected plan of ``graph`` into ``cuda_graph`` (``update``: rebind it to new buffers)."""
    graph._require("no plan is built: call build_plans first", graph._selected is not None)
    plan = graph._built[graph._selected]
    pack = graph._pack(variant_pack)
    h = handle if handle is not None else graph.handle
    native = getattr(plan, "update_cuda_graph" if update else "populate_cuda_graph", None)
    captured = getattr(plan, "_captured_graphs", set())
    if native is not None and not (update and _key(cuda_graph) in captured):
        try:
            return native(cuda_graph, pack, workspace, handle=h)
        except CudnnError as e:
            if int(e.status) != int(NATIVE_REFUSED) or simulator_enabled():
                raise reraise(e, f"graph '{graph.name}' {'update' if update else 'populate'}_cuda_graph") from None
    if simulator_enabled():
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, "CUDA graphs do not exist in the CUDA simulator")
    _capture(graph, plan, pack, workspace, cuda_graph, clear=update)
    plan.__dict__.setdefault("_captured_graphs", set()).add(_key(cuda_graph))


def _key(cuda_graph):
    try:
        return int(cuda_graph)
    except (TypeError, ValueError):
        return id(cuda_graph)


def _capture(graph, plan, pack, workspace, cuda_graph, clear):
    from cuda.bindings import driver

    g = _graph_handle(cuda_graph)
    if clear:
        (nodes, n) = _check(driver.cuGraphGetNodes(g, 0), "cuGraphGetNodes")
        if n:
            nodes, n = _check(driver.cuGraphGetNodes(g, n), "cuGraphGetNodes")
            for node in nodes[:n]:
                _check(driver.cuGraphDestroyNode(node), "cuGraphDestroyNode")
    (stream,) = _check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
    try:
        _check(driver.cuStreamBeginCaptureToGraph(stream, g, None, None, 0,
                                                  driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
               "cuStreamBeginCaptureToGraph")
        failure = None
        try:
            from ..engines import api

            api.execute(plan, pack, workspace, handle=None, stream=int(stream))
        except Exception as e:  # end the capture before reporting
            failure = e
        _check(driver.cuStreamEndCapture(stream), "cuStreamEndCapture")
        if failure is not None:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"graph '{graph.name}': recording plan "
                              f"{graph._candidates[graph._selected]} into a CUDA graph failed: "
                              f"{type(failure).__name__}: {failure}")
    finally:
        driver.cuStreamDestroy(stream)
