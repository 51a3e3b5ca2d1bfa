"""The native CUDA graph path: a plan's kernels added to a user's ``CUgraph`` as kernel nodes.

``populate(plan, graph, pack, workspace)`` binds the plan to the variant pack (checked like
``execute``), and adds one kernel node per launch, each depending on the previous one, at the roots
of ``graph``; nothing runs. ``update(...)`` rebinds to a new pack and rewrites the parameters of the
nodes it added (``cuGraphKernelNodeSetParams``), so the graph can be instantiated again or pushed to
an executable graph with ``cuGraphExecUpdate``. Every part must expose its launches
(``SubPlan.launches``); the simulator has no CUDA graphs.

As with cuDNN, the nodes hold raw addresses: the caller keeps every buffer of the pack (and the
workspace) alive for as long as the graph may run. By-value scalars are the plan's own copies.
"""
import ctypes

from ..errors import BadParamError, ExecutionFailedError, NotSupportedError
from ..platform import simulator_enabled
from ..types import cudnnStatus_t

S = cudnnStatus_t


def _graph_int(graph):
    if graph is None:
        raise BadParamError("cudaGraph is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    try:
        handle = int(graph)  # a CUgraph's int() is the handle; its getPtr() is where the handle is stored
    except (TypeError, ValueError):
        raise BadParamError(f"{type(graph).__name__} is not a CUgraph / cudaGraph_t") from None
    if handle == 0:
        raise BadParamError("cudaGraph is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    return handle


def _launches(plan, pack, workspace):
    if simulator_enabled():
        raise NotSupportedError("the CUDA simulator has no CUDA graphs",
                                S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    launches = plan.launches(pack, workspace)
    if launches is None:
        raise NotSupportedError(f"{plan.describe()}: an engine of this plan cannot give its kernel launches",
                                S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    for pl in launches:
        if pl.kernel.cooperative:
            raise NotSupportedError(f"kernel {pl.kernel.name} is cooperative: not a plain kernel node",
                                    S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    return launches


def _params(pl, keep):
    from cuda.bindings import driver as drv

    # The launch's own packed buffer (pointer slots of records / CPointers already patched there, not
    # in ``pl.params``); CUDA copies the values when the node is added or set.
    keep.append(pl)
    p = drv.CUDA_KERNEL_NODE_PARAMS()
    p.func = pl.kernel.function
    p.gridDimX, p.gridDimY, p.gridDimZ = pl.grid
    p.blockDimX, p.blockDimY, p.blockDimZ = pl.block
    p.sharedMemBytes = pl.shared
    p.kernelParams = ctypes.addressof(pl._argv)
    p.extra = 0
    return p


def _check(ret, what):
    from cuda.bindings import driver as drv

    if ret[0] != drv.CUresult.CUDA_SUCCESS:
        raise ExecutionFailedError(f"{what} failed: {ret[0]}", S.CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    return ret[1] if len(ret) > 1 else None


def populate(plan, graph, pack, workspace=None):
    """Add the plan's kernels to ``graph`` as a chain of kernel nodes; returns the nodes."""
    from cuda.bindings import driver as drv

    handle = _graph_int(graph)
    launches = _launches(plan, pack, workspace)
    g = drv.CUgraph(handle)
    keep, nodes, deps = [], [], []
    for pl in launches:
        node = _check(drv.cuGraphAddKernelNode(g, deps, len(deps), _params(pl, keep)), "cuGraphAddKernelNode")
        nodes.append(node)
        deps = [node]
    plan.graph_nodes[handle] = (tuple(nodes), tuple(launches))
    return nodes


def update(plan, graph, pack, workspace=None):
    """Point the nodes :func:`populate` added to ``graph`` at a new variant pack."""
    from cuda.bindings import driver as drv

    handle = _graph_int(graph)
    known = plan.graph_nodes.get(handle)
    if known is None:
        raise BadParamError("this cudaGraph was not populated with this plan (cudnnBackendPopulateCudaGraph first)",
                            S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    nodes, _ = known
    launches = _launches(plan, pack, workspace)
    if len(launches) != len(nodes):
        raise BadParamError(f"the plan now has {len(launches)} launches, the graph holds {len(nodes)} nodes",
                            S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    keep = []
    for node, pl in zip(nodes, launches):
        _check(drv.cuGraphKernelNodeSetParams(node, _params(pl, keep)), "cuGraphKernelNodeSetParams")
    plan.graph_nodes[handle] = (nodes, tuple(launches))
