"""Reduction engine: the vector-kernel knobs (TILE_ROWS, ARRAY_SIZE_PER_THREAD, CTA_COUNT) are refused on
reductions whose elements are not contiguous runs (a column kernel with TILE_ROWS 8 asked 32 x 256 threads:
CUDA_ERROR_INVALID_VALUE on the H200), so every kept config builds a launchable kernel, and the ranked plan of a
column reduction and of an NCHW -> (1, 1, H, W) reduction matches the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.reduce.reduction import KR, KU, _spec, reduction_spec_knobs, vector_problem
from ncudnn.ir import OpGraph, Reduction, TensorDesc, packed_strides
from ncudnn.kernels.reduce import strided as kr
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT, cudnnReduceTensorOp_t as RO
from ncudnn.types import cudnnStatus_t as S

F32 = DT.CUDNN_DATA_FLOAT
K_BLOCK = K.CUDNN_KNOB_TYPE_BLOCK_SIZE


def _graph(xd, yd, mode=RO.CUDNN_REDUCE_TENSOR_ADD):
    x = TensorDesc(1, tuple(xd), packed_strides(xd), F32, name="x")
    y = TensorDesc(2, tuple(yd), packed_strides(yd), F32, name="y")
    return OpGraph([Reduction("red", {"X": x}, {"Y": y}, mode=mode)]).finalize()


@pytest.mark.parametrize("xd,yd,mode", [((40, 24), (1, 24), RO.CUDNN_REDUCE_TENSOR_ADD),
                                        ((3, 4, 5, 6), (1, 1, 5, 6), RO.CUDNN_REDUCE_TENSOR_NORM2)],
                         ids=["cols", "nchw_to_hw"])
def test_column_reductions_keep_only_launchable_configs(rng, xd, yd, mode):
    eng, cx = registry.by_name("reduction"), api.context()
    row = _graph((8, 64), (8, 1))                 # a vector problem first: its candidates are not the column's
    assert any(c.get(KR, 0) > 1 for c in eng.candidates(api.problem(row), cx))
    g = _graph(xd, yd, mode)
    sub = api.problem(g)
    assert all(eng.keep(sub, c, cx)[0] == S.CUDNN_STATUS_SUCCESS for c in eng.candidates(sub, cx))
    assert not vector_problem(_spec(sub.nodes[0]))
    bad = eng.default_config(sub).with_knob(KR, 8).with_knob(K_BLOCK, 256)
    st, why = eng.keep(sub, bad, cx)
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "contiguous" in why
    assert eng.keep(sub, eng.default_config(sub).with_knob(KU, 4), cx)[0] == S.CUDNN_STATUS_NOT_SUPPORTED
    for ec in api.get_heuristics(g, ctx=cx):
        k = kr.build_reduce(reduction_spec_knobs(_spec(sub.nodes[0]), ec.config))
        th = k.threads if isinstance(k.threads, int) else k.threads[0] * k.threads[1]
        assert th <= 1024, (ec, k.threads)
    x = rng.standard_normal(xd).astype(np.float32)
    out = cuda.to_device(np.full(int(np.prod(yd)), poison_value(np.float32), np.float32))
    plan = api.build_plan(g, api.get_heuristics(g, ctx=cx)[0], cx)
    ws = cuda.device_array(max(plan.workspace_size, 1), np.uint8)
    api.execute(plan, {1: cuda.to_device(x), 2: out}, ws)
    axes = tuple(i for i, (a, b) in enumerate(zip(xd, yd)) if a != b)
    x64 = x.astype(np.float64)
    ref = (x64.sum(axis=axes, keepdims=True) if mode == RO.CUDNN_REDUCE_TENSOR_ADD
           else np.sqrt((x64 * x64).sum(axis=axes, keepdims=True)))
    assert_close(out.copy_to_host().reshape(yd), ref, "float32")
