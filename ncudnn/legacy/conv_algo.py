"""Convolution algorithm queries: workspace sizes, cudnnGetConvolution*Algorithm_v7 (the engine
heuristics' ranking, mapped to algorithm values), cudnnFindConvolution*Algorithm(Ex) (measured by
the engine autotuner) and cudnnGetConvolution*AlgorithmMaxCount.

Perf results come back as a list of perf-struct objects with cuDNN's field names (algo, status,
time in ms, memory in bytes, determinism, mathType): supported algorithms first, fastest first, then
the unsupported ones with status NOT_SUPPORTED, time -1 and memory 0 — as cuDNN fills its array.
Get_v7's time is the heuristic model's prediction; Find's is the measured median.
"""
import numpy as np

from .. import memory
from ..errors import BadParamError, c_api
from ..engines import api
from ..handle import get_handle_or_raise
from ..types import cudnnStatus_t
from . import algos as A
from . import lower as L
from ._util import desc_arg, enum_arg, int_arg, optional_ptrs, size_arg
from .conv import ConvProblem, algo_config, ranked, workspace_bytes
from .conv_desc import ConvolutionDescriptor
from .tensor_desc import FilterDescriptor, TensorDescriptor

S = cudnnStatus_t


def _problem(direction, a, b, conv, c):
    """Descriptors in the C argument order of each direction -> ConvProblem(x, w, y)."""
    cd = desc_arg(conv, ConvolutionDescriptor, "convDesc")
    if direction == "fwd":
        x, w, y = desc_arg(a, TensorDescriptor, "xDesc"), desc_arg(b, FilterDescriptor, "wDesc"), \
            desc_arg(c, TensorDescriptor, "yDesc")
    elif direction == "dgrad":
        w, y, x = desc_arg(a, FilterDescriptor, "wDesc"), desc_arg(b, TensorDescriptor, "dyDesc"), \
            desc_arg(c, TensorDescriptor, "dxDesc")
    else:
        x, y, w = desc_arg(a, TensorDescriptor, "xDesc"), desc_arg(b, TensorDescriptor, "dyDesc"), \
            desc_arg(c, FilterDescriptor, "dwDesc")
    return ConvProblem(direction, x, w, y, cd)


def _workspace(handle, direction, a, b, conv, c, algo):
    h = get_handle_or_raise(handle)
    prob = _problem(direction, a, b, conv, c)
    algo = enum_arg(A.ALGO_ENUM[direction], algo, "algo")
    return workspace_bytes(algo_config(prob.lowered(h), direction, algo)[0])


@c_api(1)
def cudnnGetConvolutionForwardWorkspaceSize(handle, xDesc, wDesc, convDesc, yDesc, algo):
    return _workspace(handle, "fwd", xDesc, wDesc, convDesc, yDesc, algo)


@c_api(1)
def cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wDesc, dyDesc, convDesc, dxDesc, algo):
    return _workspace(handle, "dgrad", wDesc, dyDesc, convDesc, dxDesc, algo)


@c_api(1)
def cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xDesc, dyDesc, convDesc, gradDesc, algo):
    return _workspace(handle, "wgrad", xDesc, dyDesc, convDesc, gradDesc, algo)


def _max_count(handle, direction):
    get_handle_or_raise(handle)
    return A.max_count(direction)


@c_api(1)
def cudnnGetConvolutionForwardAlgorithmMaxCount(handle):
    return _max_count(handle, "fwd")


@c_api(1)
def cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle):
    return _max_count(handle, "dgrad")


@c_api(1)
def cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle):
    return _max_count(handle, "wgrad")


def _requested(n):
    n = int_arg(n, "requestedAlgoCount")
    if n < 1:
        raise BadParamError(f"requestedAlgoCount = {n} must be >= 1")
    return n


def _sorted(rows, n):
    """Supported first, by time, an algorithm on its own engine family before one run by a substitute;
    then the unsupported ones in enum order. ``rows``: (perf, substituted)."""
    ok = sorted([r for r in rows if r[0].status == S.CUDNN_STATUS_SUCCESS], key=lambda r: (r[0].time, r[1]))
    rest = [r for r in rows if r[0].status != S.CUDNN_STATUS_SUCCESS]
    out = [p for p, _ in ok + rest][:n]
    return len(out), out


def _perf_rows(prob, low, direction, time_of):
    """(perf struct, substituted) per algorithm: its best config, timed by ``time_of(ec)`` (ms, or None:
    failed)."""
    cls = A.PERF_TYPE[direction]
    r = ranked(low)
    rows = []
    for algo in A.algos(direction):
        cands = A.configs_for(r, algo, direction) if A.SUBSTITUTES[direction].get(algo) else []
        if not cands:
            rows.append((cls(algo), False))
            continue
        ec = cands[0]
        sub = A.config_family(ec, direction) != algo
        t = time_of(ec)
        if t is None:
            rows.append((cls(algo, S.CUDNN_STATUS_NOT_SUPPORTED), sub))
            continue
        rows.append((cls(algo, S.CUDNN_STATUS_SUCCESS, t, workspace_bytes(ec), A.determinism(ec),
                         A.math_type(ec, prob.conv.math_type)), sub))
    return rows


def _get_v7(handle, direction, a, b, conv, c, requestedAlgoCount):
    h = get_handle_or_raise(handle)
    n = _requested(requestedAlgoCount)
    prob = _problem(direction, a, b, conv, c)
    low = prob.lowered(h)
    return _sorted(_perf_rows(prob, low, direction, lambda ec: ec.predicted_time * 1e3), n)


@c_api(2)
def cudnnGetConvolutionForwardAlgorithm_v7(handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount):
    """(status, returnedAlgoCount, perfResults)."""
    return _get_v7(handle, "fwd", srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount)


@c_api(2)
def cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, filterDesc, diffDesc, convDesc, gradDesc,
                                                requestedAlgoCount):
    return _get_v7(handle, "dgrad", filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount)


@c_api(2)
def cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, srcDesc, diffDesc, convDesc, gradDesc,
                                                  requestedAlgoCount):
    return _get_v7(handle, "wgrad", srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount)


# -------------------------------------------------------------------------------------- Find

_NAMES = {"fwd": ("x", "w", "y"), "dgrad": ("dx", "w", "dy"), "wgrad": ("x", "dw", "dy")}


def _find(h, prob, n, bufs, workspace, ws_size):
    """Measure each algorithm's best config on ``bufs`` (name -> buffer) with the engine autotuner."""
    direction = prob.direction
    low = prob.lowered(h)
    r = ranked(low)
    best = {}
    for algo in A.algos(direction):
        if A.SUBSTITUTES[direction].get(algo):
            cands = A.configs_for(r, algo, direction)
            if cands:
                best[int(algo)] = cands[0]
    fits = [ec for ec in {e.ident(): e for e in best.values()}.values()
            if ws_size is None or workspace_bytes(ec) <= ws_size]
    times = {}
    if fits:
        need = max(workspace_bytes(ec) for ec in fits)
        ws = workspace if ws_size is not None else (h.workspace_view(need) if need else None)
        pack = L.pack_of(low, bufs)
        for res in api.autotune(low.graph, fits, pack, ws, low.ctx, reuse=False):
            times[res.engine_config.ident()] = res.median_ms
    return _sorted(_perf_rows(prob, low, direction, lambda ec: times.get(ec.ident())), n)


def _scratch_buffers(prob):
    """Zeroed device buffers for Find without user buffers."""
    out = {}
    for name, d in zip(_NAMES[prob.direction], (prob.x, prob.w, prob.y)):
        buf = out[name] = memory.allocate(max(d.size_in_bytes(), 1))
        memory.to_numba(buf).copy_to_device(np.zeros(buf.nbytes, np.uint8))  # no garbage floats (inf / NaN)
    return out


def _find_plain(handle, direction, a, b, conv, c, requestedAlgoCount):
    h = get_handle_or_raise(handle)
    n = _requested(requestedAlgoCount)
    prob = _problem(direction, a, b, conv, c)
    return _find(h, prob, n, _scratch_buffers(prob), None, None)


def _find_ex(handle, direction, a, pa, b, pb, conv, c, pc, requestedAlgoCount, workSpace, workSpaceSizeInBytes):
    h = get_handle_or_raise(handle)
    n = _requested(requestedAlgoCount)
    prob = _problem(direction, a, b, conv, c)
    names = {"fwd": ("x", "w", "y"), "dgrad": ("w", "dy", "dx"), "wgrad": ("x", "dy", "dw")}[direction]
    bufs = dict(zip(names, (pa, pb, pc)))
    for k, v in bufs.items():
        if v is None:
            raise BadParamError(f"{k} is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    optional_ptrs(workSpace=workSpace)
    size = size_arg(workSpaceSizeInBytes, "workSpaceSizeInBytes") if workSpace is not None else 0
    return _find(h, prob, n, bufs, workSpace, size)


@c_api(2)
def cudnnFindConvolutionForwardAlgorithm(handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount):
    """(status, returnedAlgoCount, perfResults): measured on buffers ncudnn allocates."""
    return _find_plain(handle, "fwd", xDesc, wDesc, convDesc, yDesc, requestedAlgoCount)


@c_api(2)
def cudnnFindConvolutionBackwardDataAlgorithm(handle, wDesc, dyDesc, convDesc, dxDesc, requestedAlgoCount):
    return _find_plain(handle, "dgrad", wDesc, dyDesc, convDesc, dxDesc, requestedAlgoCount)


@c_api(2)
def cudnnFindConvolutionBackwardFilterAlgorithm(handle, xDesc, dyDesc, convDesc, dwDesc, requestedAlgoCount):
    return _find_plain(handle, "wgrad", xDesc, dyDesc, convDesc, dwDesc, requestedAlgoCount)


@c_api(2)
def cudnnFindConvolutionForwardAlgorithmEx(handle, xDesc, x, wDesc, w, convDesc, yDesc, y, requestedAlgoCount,
                                           workSpace, workSpaceSizeInBytes):
    """(status, returnedAlgoCount, perfResults): measured on the caller's buffers and workspace
    (algorithms needing more workspace than given are reported NOT_SUPPORTED)."""
    return _find_ex(handle, "fwd", xDesc, x, wDesc, w, convDesc, yDesc, y, requestedAlgoCount, workSpace,
                    workSpaceSizeInBytes)


@c_api(2)
def cudnnFindConvolutionBackwardDataAlgorithmEx(handle, wDesc, w, dyDesc, dy, convDesc, dxDesc, dx,
                                                requestedAlgoCount, workSpace, workSpaceSizeInBytes):
    return _find_ex(handle, "dgrad", wDesc, w, dyDesc, dy, convDesc, dxDesc, dx, requestedAlgoCount, workSpace,
                    workSpaceSizeInBytes)


@c_api(2)
def cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, xDesc, x, dyDesc, y, convDesc, dwDesc, dw,
                                                  requestedAlgoCount, workSpace, workSpaceSizeInBytes):
    return _find_ex(handle, "wgrad", xDesc, x, dyDesc, y, convDesc, dwDesc, dw, requestedAlgoCount, workSpace,
                    workSpaceSizeInBytes)

