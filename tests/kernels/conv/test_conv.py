"""Implicit-GEMM convolution forward (ncudnn.kernels.conv) against the float64 oracle."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.kernels.runtime import dtypes as dt
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.conv import geometry, make_conv_fprop, packed_strides
from ncudnn.kernels.conv.table import table_bytes
from ncudnn.kernels.gemm import CONFIGS, GemmConfig
from ncudnn.testing import assert_close, poison_value, random, size

CFG = size(GemmConfig(BLOCK_M=16, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0),
           CONFIGS[0])


def to_layout(a, layout):
    """(flat storage, element strides) of logical (N, C, *S) array ``a`` stored NC*S or N*SC."""
    if layout == "nchw":
        return np.ascontiguousarray(a).ravel(), packed_strides(a.shape, "nchw")
    perm = (0,) + tuple(range(2, a.ndim)) + (1,)
    return np.ascontiguousarray(a.transpose(perm)).ravel(), packed_strides(a.shape, "nhwc")


def from_layout(flat, shape, layout):
    if layout == "nchw":
        return flat.reshape(shape)
    phys = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    inv = (0, len(shape) - 1) + tuple(range(1, len(shape) - 1))
    return flat.reshape(phys).transpose(inv)


def fprop_case(rng, x_shape, w_shape, layout="nchw", precomp=True, cfg=CFG, dtype="float32",
               spec=ep.EpilogueSpec(), alpha=1.0, beta=0.0, order=None, **kw):
    x, w = random(rng, x_shape, dtype), random(rng, w_shape, dtype)
    conv_kw = {k: v for k, v in kw.items()}
    ref = alpha * R.conv_fprop(x, w, **conv_kw)
    fx, sx = to_layout(dt.to_storage(x), layout)
    fw, sw = to_layout(dt.to_storage(w), layout)
    y_shape = ref.shape
    _, sy = to_layout(np.empty(y_shape, np.float32), layout)
    g = geometry(x_shape, w_shape, x_strides=sx, w_strides=sw, y_strides=sy, **conv_kw)
    order = order or ("rsc" if layout == "nhwc" else "crs")
    fast = "k" if layout == "nhwc" else "outer"
    k = make_conv_fprop(cfg, (dtype, dtype, dtype), spec, order=order, a_fast=fast, b_fast="k",
                        precomp=precomp)
    y0 = random(rng, y_shape, dtype)
    if beta:
        y = to_layout(dt.to_storage(y0), layout)[0].copy()
        ref = ref + beta * y0.astype(np.float64)
    else:
        y = to_layout(dt.to_storage(np.full(y_shape, poison_value(np.float32), np.float32).astype(dtype)),
                      layout)[0].copy()
    table = k.make_table(g) if precomp else None
    if precomp:
        assert table.nbytes == k.table_size(g) == table_bytes(g.Cg, g.taps)
    ws = np.full(k.workspace_size(g) // 4, np.nan, np.float32) if k.workspace_size(g) else None
    extra = {}
    bias = None
    if spec.bias_axis:
        bias = random(rng, (w_shape[0],), np.float32)
        extra["bias"] = bias
    res = None
    if spec.has_residual:
        res = random(rng, y_shape, np.float32)
        extra["residual"] = to_layout(res, layout)[0]
    k.run(g, fx, fw, y, table=table, alpha=alpha, beta=beta, workspace=ws, **extra)
    got = dt.from_storage(from_layout(y, y_shape, layout), dtype)
    return got, ref, bias, res


@pytest.mark.parametrize("precomp", [True, False])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_fprop_2d_stride_pad_dilation(rng, precomp, layout):
    got, ref, _, _ = fprop_case(rng, size((2, 3, 7, 8), (8, 64, 28, 28)), size((5, 3, 3, 2), (64, 64, 3, 3)),
                                layout, precomp, stride=(2, 1), pre_pad=(1, 0), post_pad=(0, 2),
                                dilation=(1, 2))
    assert_close(got, ref, "float32")


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_fprop_convolution_mode_and_groups(rng, layout):
    got, ref, _, _ = fprop_case(rng, size((1, 4, 6, 6), (8, 64, 28, 28)), size((6, 2, 3, 3), (64, 32, 3, 3)),
                                layout, groups=2, pre_pad=1, post_pad=1, cross_correlation=False)
    assert_close(got, ref, "float32")


def test_fprop_vec4_config(rng):
    cfg = size(GemmConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=4, THREAD_M=4, THREAD_N=4, WARP_M=0,
                          WARP_N=0, VEC=4), CONFIGS[0])
    got, ref, _, _ = fprop_case(rng, size((2, 3, 6, 5), (8, 64, 28, 28)), size((5, 3, 3, 3), (64, 64, 3, 3)),
                                "nhwc", cfg=cfg, stride=1, pre_pad=1, post_pad=0)
    assert_close(got, ref, "float32")


def test_fprop_depthwise(rng):
    got, ref, _, _ = fprop_case(rng, size((2, 3, 6, 5), (8, 64, 28, 28)), size((3, 1, 3, 3), (64, 1, 3, 3)),
                                groups=size(3, 64), stride=2, pre_pad=1, post_pad=1)
    assert_close(got, ref, "float32")


def test_fprop_1d_and_3d(rng):
    got, ref, _, _ = fprop_case(rng, size((2, 3, 11), (8, 64, 100)), size((4, 3, 3), (64, 64, 3)),
                                stride=2, pre_pad=2, post_pad=0, dilation=2)
    assert_close(got, ref, "float32")
    got, ref, _, _ = fprop_case(rng, size((1, 2, 4, 5, 4), (2, 32, 8, 14, 14)),
                                size((3, 2, 2, 3, 2), (32, 32, 3, 3, 3)), "nhwc",
                                stride=(1, 2, 1), pre_pad=(1, 0, 1), post_pad=(0, 1, 0))
    assert_close(got, ref, "float32")


def test_fprop_epilogue_bias_relu_residual_alpha(rng):
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))
    got, ref, bias, res = fprop_case(rng, size((2, 3, 5, 5), (8, 64, 28, 28)), size((6, 3, 3, 3), (64, 64, 3, 3)),
                                     "nhwc", spec=spec, alpha=0.5, pre_pad=1, post_pad=1)
    want = np.maximum(ref + bias[None, :, None, None] + res, 0)
    assert_close(got, want, "float32")


def test_fprop_beta_blend_split_k(rng):
    cfg = CFG.replace(SPLIT_K=3)
    got, ref, _, _ = fprop_case(rng, size((1, 5, 5, 4), (4, 256, 14, 14)), size((4, 5, 3, 3), (64, 256, 3, 3)),
                                cfg=cfg, alpha=1.5, beta=-0.5, pre_pad=1, post_pad=1)
    assert_close(got, ref, "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fprop_half(rng, dtype):
    import ml_dtypes  # noqa: F401
    got, ref, _, _ = fprop_case(rng, size((2, 3, 5, 6), (8, 64, 28, 28)), size((4, 3, 3, 3), (64, 64, 3, 3)),
                                "nhwc", dtype=dtype, stride=1, pre_pad=1, post_pad=1)
    assert_close(got, ref, dtype)


def test_fprop_float64(rng):
    got, ref, _, _ = fprop_case(rng, size((1, 3, 5, 5), (4, 32, 14, 14)), size((4, 3, 2, 3), (32, 32, 3, 3)),
                                dtype="float64", stride=(1, 2), pre_pad=(0, 1), post_pad=(1, 0), cfg=CFG.replace(VEC=1))
    assert_close(got, ref, "float64")


def test_fprop_checks_table_and_shapes(rng):
    g = geometry((1, 2, 4, 4), (2, 2, 3, 3))
    k = make_conv_fprop(CFG)
    x = np.ones(32, np.float32)
    with pytest.raises(ValueError, match="table"):
        k.run(g, x, np.ones(36, np.float32), np.ones(8, np.float32))
    with pytest.raises(ValueError, match="reaches past"):
        k.run(g, x[:20], np.ones(36, np.float32), np.ones(8, np.float32), table=k.make_table(g))
    with pytest.raises(ValueError):
        geometry((1, 3, 4, 4), (2, 2, 3, 3), groups=2)
