"""The native CUDA graph path of a plan: kernel nodes added to a user's CUgraph, then rebound."""
import numpy as np
import pytest

from ncudnn.engines import api
from ncudnn.errors import CudnnError
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnStatus_t as S

import engine_graphs as G

DIMS = (2, 3, 4, 5)


def _case(rng):
    x, b, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (DIMS, (1, 3, 1, 1), DIMS))
    return x, b, y, (x.astype(np.float64) + b) * np.maximum(y, 0)


def _plan():
    g = G.bias_relu_mul(DIMS)
    return api.build_plan(g, api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)[0])


@pytest.mark.sim_only
def test_simulator_refuses_cuda_graphs(rng):
    x, b, y, _ = _case(rng)
    pack = {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: G.poisoned(DIMS)}
    with pytest.raises(CudnnError) as ei:
        _plan().populate_cuda_graph(1, pack)
    assert ei.value.status == S.CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API
    with pytest.raises(CudnnError) as ei:
        _plan().populate_cuda_graph(None, pack)
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    with pytest.raises(CudnnError) as ei:
        _plan().update_cuda_graph(1, pack)  # never populated
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH


@pytest.mark.gpu
def test_populate_instantiate_update(rng):
    from cuda.bindings import driver
    from numba import cuda

    plan = _plan()
    x, b, y, ref = _case(rng)
    out = G.poisoned(DIMS)
    pack = {1: G.device(x), 2: G.device(b), 3: G.device(y), 4: out}
    err, graph = driver.cuGraphCreate(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    plan.populate_cuda_graph(graph, pack)
    cuda.synchronize()
    assert np.isnan(out.copy_to_host()).all(), "populating must not run anything"
    err, _, n = driver.cuGraphGetNodes(graph, 0)
    launches = plan.launches(pack)
    assert err == driver.CUresult.CUDA_SUCCESS and n == len(launches) >= 1, (err, n, launches)
    err, exe = driver.cuGraphInstantiate(graph, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate: {err}"
    err = driver.cuGraphLaunch(exe, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch: {err}"
    cuda.synchronize()
    assert_close(out.copy_to_host(), ref, "float32")
    x2, _, _, _ = _case(rng)
    out2 = G.poisoned(DIMS)
    x2d = G.device(x2)  # the caller keeps the graph's buffers alive until it has run
    plan.update_cuda_graph(graph, {**pack, 1: x2d, 4: out2})
    err, exe2 = driver.cuGraphInstantiate(graph, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphInstantiate after update: {err}"
    err = driver.cuGraphLaunch(exe2, 0)[0]
    assert err == driver.CUresult.CUDA_SUCCESS, f"cuGraphLaunch after update: {err}"
    cuda.synchronize()
    assert_close(out2.copy_to_host(), (x2.astype(np.float64) + b) * np.maximum(y, 0), "float32")
    with pytest.raises(CudnnError) as ei:
        plan.update_cuda_graph(driver.cuGraphCreate(0)[1], pack)  # never populated
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH


def test_graph_handle_and_kernel_node_params():
    """No driver needed: a CUgraph is read by its value (not getPtr(), where that value is stored), and a
    node's parameters carry the launch's function, geometry and its own packed parameter buffer."""
    import ctypes
    from types import SimpleNamespace

    from cuda.bindings import driver

    from ncudnn.engines import cudagraph
    from ncudnn.kernels.runtime.launch import pack_params

    assert cudagraph._graph_int(driver.CUgraph(0x5A5A0)) == 0x5A5A0
    assert cudagraph._graph_int(0x5A5A0) == 0x5A5A0
    with pytest.raises(CudnnError) as ei:
        cudagraph._graph_int(driver.CUgraph(0))
    assert ei.value.status == S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER
    vals, argv = pack_params([("Q", 0xDEAD00), ("i", 7)])
    pl = SimpleNamespace(kernel=SimpleNamespace(function=driver.CUfunction(0x1230)), grid=(3, 2, 1),
                         block=(128, 1, 1), shared=4096, _vals=vals, _argv=argv)
    keep = []
    p = cudagraph._params(pl, keep)
    assert int(p.func) == 0x1230 and keep == [pl]
    assert (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ) == (3, 2, 1, 128, 1, 1)
    assert p.sharedMemBytes == 4096 and int(p.extra) == 0
    assert int(p.kernelParams) == ctypes.addressof(argv)
    slots = ctypes.cast(int(p.kernelParams), ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_uint64.from_address(slots[0]).value == 0xDEAD00
    assert ctypes.c_int32.from_address(slots[1]).value == 7
