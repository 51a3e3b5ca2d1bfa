"""gemm_common.BlockLaunch's split-K reduce: from splitk.WIDE_FROM slices the wide reduce, below it the
one-thread-per-output reduce, for every engine on BlockLaunch (here the implicit-GEMM wgrad, split over
N*P*Q); simulator, float64 oracle, poisoned output and workspace."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import ConvWgrad, OpGraph, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.kernels.gemm import splitk
from ncudnn.reference import conv as ref
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnConvolutionMode_t as CM, cudnnDataType_t as DT

TINY = gc.CONV_TILES.index(next(t for t in gc.CONV_TILES if t.label.startswith("8x8x4")))


def _t(uid, dims, nhwc):
    order = nhwc_order(len(dims)) if nhwc else None
    return TensorDesc(uid, tuple(dims), packed_strides(dims, order), DT.CUDNN_DATA_FLOAT, name=f"t{uid}")


def _dev(a, t):
    order = sorted(range(a.ndim), key=lambda i: -t.strides[i])
    return cuda.to_device(np.ascontiguousarray(np.transpose(a, order)).reshape(-1))


@pytest.mark.parametrize("split,nhwc", [(8, False)])
def test_dup_blocklaunch_wide_reduce(rng, split, nhwc):
    xdims, wdims, ydims = (2, 2, 5, 5), (3, 2, 3, 3), (2, 3, 5, 5)
    attrs = dict(spatial_dims=2, stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1),
                 mode=CM.CUDNN_CROSS_CORRELATION)
    x, dy, dw = _t(1, xdims, nhwc), _t(2, ydims, nhwc), _t(3, wdims, nhwc)
    g = OpGraph([ConvWgrad("wgrad", {"X": x, "DY": dy}, {"DW": dw}, **attrs)]).finalize()
    eng = registry.by_name("conv_implicit_gemm")
    cfg = eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, TINY)
    cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, split).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1)
    plan = api.build_plan(g, cfg)
    (part,) = plan.parts
    assert (part.bl.wide is not None) == (split >= splitk.WIDE_FROM)
    xv = rng.uniform(-1, 1, xdims).astype(np.float32)
    dyv = rng.uniform(-1, 1, ydims).astype(np.float32)
    out = cuda.to_device(np.full(dw.span_elements(), poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8))
    api.execute(plan, {1: _dev(xv, x), 2: _dev(dyv, dy), 3: out}, ws)
    h = out.copy_to_host()
    got = np.lib.stride_tricks.as_strided(h, wdims, [s * 4 for s in dw.strides]).copy()
    want = ref.conv_wgrad(xv, dyv, wdims, stride=(1, 1), pre_pad=(1, 1), post_pad=(1, 1), dilation=(1, 1),
                          cross_correlation=True)
    assert_close(got, want, "float32")
