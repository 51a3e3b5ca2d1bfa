"""Engine conv_direct end to end (simulator, tiny shapes): IR graph -> heuristics -> plan -> execute,
against the float64 oracle with poisoned outputs; refusals name the node and the field."""
import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir import ConvDgrad, ConvFprop, OpGraph, Pointwise
from ncudnn.reference import conv as ref
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnConvolutionMode_t as CM, cudnnPointwiseMode_t as PM, cudnnStatus_t as S
from test_conv_gemm_engines import conv_attrs, dev, out_buf, read, ref_kw, run, tensor, virt


def _cfg(g, block=128):
    eng = registry.by_name("conv_direct")
    return eng.default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, block)


@pytest.mark.parametrize("nhwc", [True, False])
def test_depthwise_bias_relu(rng, nhwc):
    attrs = conv_attrs(2, stride=(2, 1), pre=(1, 0), post=(0, 2), dil=(1, 2), mode=CM.CUDNN_CONVOLUTION)
    dims, wdims = (2, 4, 6, 5), (4, 1, 3, 3)
    ydims = ref.conv_output_shape(dims, wdims, stride=attrs["stride"], pre_pad=attrs["pre_padding"],
                                  post_pad=attrs["post_padding"], dilation=attrs["dilation"], groups=4)
    x, w, b, y = (tensor(1, dims, nhwc=nhwc), tensor(2, wdims, nhwc=nhwc), tensor(3, (1, 4, 1, 1), nhwc=nhwc),
                  tensor(4, ydims, nhwc=nhwc))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, **attrs)
    add = Pointwise("bias", {"X": conv.outputs["Y"], "B": b}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    g = OpGraph([conv, add, relu]).finalize()
    xv, wv, bv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (dims, wdims, b.dims))
    out = out_buf(y)
    run(g, _cfg(g), {1: dev(xv, x), 2: dev(wv, w), 3: dev(bv, b), 4: out}, ws_bytes=0)
    expect = np.maximum(ref.conv_fprop(xv, wv, groups=4, **ref_kw(attrs)) + bv, 0)
    assert_close(read(out, y), expect, "float32")


def test_tiny_channels_residual_and_alpha_beta(rng):
    attrs = conv_attrs(2, pre=1, post=1)
    dims, wdims = (1, 3, 5, 4), (5, 3, 3, 3)
    x, w, r, y = tensor(1, dims, nhwc=True), tensor(2, wdims, nhwc=True), tensor(3, (1, 5, 5, 4), nhwc=True), \
        tensor(4, (1, 5, 5, 4), nhwc=True)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": virt(10)}, alpha=0.5, **attrs)
    add = Pointwise("res", {"X": conv.outputs["Y"], "B": r}, {"Y": y}, mode=PM.CUDNN_POINTWISE_ADD)
    g = OpGraph([conv, add]).finalize()
    xv, wv, rv = (rng.uniform(-1, 1, d).astype(np.float32) for d in (dims, wdims, r.dims))
    out = out_buf(y)
    run(g, _cfg(g, 256), {1: dev(xv, x), 2: dev(wv, w), 3: dev(rv, r), 4: out})
    assert_close(read(out, y), 0.5 * ref.conv_fprop(xv, wv, **ref_kw(attrs)) + rv, "float32")
    # beta blends the old output (no epilogue after the conv)
    y2 = tensor(5, (1, 5, 5, 4), nhwc=True)
    g2 = OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y2}, alpha=2.0, beta=-1.0, **attrs)]).finalize()
    yv = rng.uniform(-1, 1, y2.dims).astype(np.float32)
    out2 = dev(yv, y2)
    run(g2, _cfg(g2), {1: dev(xv, x), 2: dev(wv, w), 5: out2})
    assert_close(read(out2, y2), 2.0 * ref.conv_fprop(xv, wv, **ref_kw(attrs)) - yv, "float32")


def test_refusals_name_node_and_field_and_ranking():
    attrs = conv_attrs(2, pre=1, post=1)
    x, w, y = tensor(1, (1, 64, 4, 4)), tensor(2, (8, 64, 3, 3)), tensor(3, (1, 8, 4, 4))
    g = OpGraph([ConvFprop("big", {"X": x, "W": w}, {"Y": y}, **attrs)]).finalize()
    st, why = api.check_support(g, "conv_direct")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE and "'big'" in why and "576" in why
    dy, w2, dx = tensor(1, (1, 2, 4, 4)), tensor(2, (2, 1, 3, 3)), tensor(3, (1, 2, 4, 4))
    g2 = OpGraph([ConvDgrad("dg", {"DY": dy, "W": w2}, {"DX": dx}, **attrs)]).finalize()
    assert api.check_support(g2, "conv_direct")[0] != S.CUDNN_STATUS_SUCCESS
    # a real-size depthwise 3x3 (MobileNet-like, N = 32, 112^2 x 32 channels) ranks conv_direct first
    x, w, y = tensor(1, (32, 32, 112, 112), nhwc=True), tensor(2, (32, 1, 3, 3), nhwc=True), \
        tensor(3, (32, 32, 112, 112), nhwc=True)
    g3 = OpGraph([ConvFprop("dw", {"X": x, "W": w}, {"Y": y}, **attrs)]).finalize()
    ecs = api.get_heuristics(g3, HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].config.engine == "conv_direct"
