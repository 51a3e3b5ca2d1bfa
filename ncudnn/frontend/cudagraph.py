"""``populate_cuda_graph`` / ``update_cuda_graph``: the selected plan's kernels recorded into a user's
CUDA graph (a ``CUgraph`` / ``cudaGraph_t`` from cuda-python, or its integer value).

Recording is stream capture into the existing graph (``cuStreamBeginCaptureToGraph``) of one execute on
a private stream (relaxed mode: a first-time binding may query or load modules): nothing runs while
capturing. ``update_cuda_graph`` empties the graph and records
again with the new buffers, so an instantiated ``cudaGraphExec_t`` can take it through
``cudaGraphExecUpdate``. The CUDA simulator has no graphs: both raise cudnnGraphNotSupportedError there.
"""
from ..platform import simulator_enabled
from ..types import cudnnStatus_t
from .errors import graph_error

S = cudnnStatus_t


def _graph_handle(cuda_graph):
    from cuda.bindings import driver

    if isinstance(cuda_graph, driver.CUgraph):
        return cuda_graph
    raw = cuda_graph
    if not isinstance(raw, int):
        getptr = getattr(cuda_graph, "getPtr", None)
        raw = int(getptr()) if getptr is not None else int(cuda_graph)
    if raw == 0:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cuda_graph is NULL")
    return driver.CUgraph(raw)


def _check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise graph_error(S.CUDNN_STATUS_EXECUTION_FAILED, f"{what} failed: {err.name}")
    return result[1:] if isinstance(result, tuple) else ()


def record(graph, handle, variant_pack, workspace, cuda_graph, clear=False):
    """Capture one execute of ``graph``'s selected plan into ``cuda_graph`` (emptied first when ``clear``)."""
    if simulator_enabled():
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, "CUDA graphs do not exist in the CUDA simulator")
    graph._require("no plan is built: call build_plans first", graph._selected is not None)
    from cuda.bindings import driver

    g = _graph_handle(cuda_graph)
    if clear:
        (nodes, n) = _check(driver.cuGraphGetNodes(g, 0), "cuGraphGetNodes")
        if n:
            nodes, n = _check(driver.cuGraphGetNodes(g, n), "cuGraphGetNodes")
            for node in nodes[:n]:
                _check(driver.cuGraphDestroyNode(node), "cuGraphDestroyNode")
    pack = graph._pack(variant_pack)
    plan = graph._built[graph._selected]
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
