"""The fused F(2x2, 3x3) Winograd engine end to end (simulator, tiny shapes, the 16-thread block)
against the float64 oracle; workspace exactly the transformed filter."""
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.ir import ConvDgrad, ConvFprop, OpGraph, Pointwise
from ncudnn.reference import conv as ref
from ncudnn.testing import poison_value, rel_err
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S
from test_winograd_engines import attrs, conv_graph, dev, read, run, tensor, virt

ENGINE = "conv_winograd_fused"
TOL = 2e-6


def config(g):
    cands = registry.by_name(ENGINE).candidates(api.problem(g), api.context())
    assert cands
    return cands[0]


def poisoned(t):
    return cuda.to_device(np.full(t.span_elements(), poison_value(np.float32), np.float32))


@pytest.mark.parametrize("nhwc", [False, True])
def test_fused_fprop_bias_relu(rng, nhwc):
    g, x, w, b, y = conv_graph((1, 5, 7, 6), 6, attrs(pre=(1, 0), post=(1, 2)), nhwc=nhwc, epilogue=True)
    xv, wv = rng.uniform(-1, 1, x.dims).astype(np.float32), rng.uniform(-1, 1, w.dims).astype(np.float32)
    bv = rng.uniform(-1, 1, b.dims).astype(np.float32)
    out = poisoned(y)
    plan = run(g, config(g), {1: dev(xv, x), 2: dev(wv, w), 3: dev(bv, b), 4: out})
    assert plan.parts[0].workspace_size == 16 * 6 * 5 * 4 <= plan.workspace_size
    expect = np.maximum(ref.conv_fprop(xv, wv, pre_pad=(1, 0), post_pad=(1, 2)) + bv, 0)
    assert rel_err(read(out, y), expect) < TOL


def test_fused_residual_alpha_convolution_mode(rng):
    a = attrs(mode=CM.CUDNN_CONVOLUTION)
    x, w, r, y = tensor(1, (2, 3, 5, 5)), tensor(2, (4, 3, 3, 3)), tensor(3, (2, 4, 5, 5)), tensor(4, (2, 4, 5, 5))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, alpha=0.5, **a)
    add = Pointwise("res", {"X": conv.outputs["Y"], "B": r}, {"Y": y}, mode=PM.CUDNN_POINTWISE_ADD)
    g = OpGraph([conv, add]).finalize()
    xv, wv, rv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (x.dims, w.dims, r.dims))
    out = poisoned(y)
    run(g, config(g), {1: dev(xv, x), 2: dev(wv, w), 3: dev(rv, r), 4: out})
    expect = 0.5 * ref.conv_fprop(xv, wv, pre_pad=1, post_pad=1, cross_correlation=False) + rv
    assert rel_err(read(out, y), expect) < TOL


def test_fused_dgrad(rng):
    xdims, wdims = (1, 3, 6, 5), (5, 3, 3, 3)
    ydims = ref.conv_output_shape(xdims, wdims, pre_pad=(1, 0), post_pad=(1, 2))
    dy, w, dx = tensor(1, ydims), tensor(2, wdims), tensor(3, xdims)
    g = OpGraph([ConvDgrad("dgrad", {"DY": dy, "W": w}, {"DX": dx}, **attrs(pre=(1, 0), post=(1, 2)))]).finalize()
    dyv, wv = rng.uniform(-1, 1, ydims).astype(np.float32), rng.uniform(-1, 1, wdims).astype(np.float32)
    out = poisoned(dx)
    run(g, config(g), {1: dev(dyv, dy), 2: dev(wv, w), 3: out})
    assert rel_err(read(out, dx), ref.conv_dgrad(dyv, wv, xdims, pre_pad=(1, 0), post_pad=(1, 2))) < TOL


def test_fused_multi_thread_block(rng):
    """64 threads: 4 per position, 4x4 interleaved accumulators, two exchange passes; K and the
    tile count not multiples of the block."""
    from ncudnn.engines.winograd.fused import FUSED_TILES
    from ncudnn.types import cudnnBackendKnobType_t as K

    idx = [t[0] for t in FUSED_TILES].index("8k x 8t x 4c t4x4")
    g, x, w, b, y = conv_graph((1, 6, 5, 7), 10, attrs(), nhwc=True, epilogue=True)
    cfg = config(g).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, idx)
    xv, wv = rng.uniform(-1, 1, x.dims).astype(np.float32), rng.uniform(-1, 1, w.dims).astype(np.float32)
    bv = rng.uniform(-1, 1, b.dims).astype(np.float32)
    out = poisoned(y)
    run(g, cfg, {1: dev(xv, x), 2: dev(wv, w), 3: dev(bv, b), 4: out})
    expect = np.maximum(ref.conv_fprop(xv, wv, pre_pad=1, post_pad=1) + bv, 0)
    assert rel_err(read(out, y), expect) < TOL


def test_fused_rejects_stride():
    x, w = tensor(1, (1, 4, 9, 9)), tensor(2, (4, 4, 3, 3))
    y = tensor(4, ref.conv_output_shape(x.dims, w.dims, stride=2, pre_pad=1, post_pad=1))
    g = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs(stride=2))]).finalize()
    st, why = registry.by_name(ENGINE).check_support(api.problem(g), api.context())
    assert st != S.CUDNN_STATUS_SUCCESS and "stride (2, 2) is not 1" in why
