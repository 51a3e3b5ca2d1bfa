"""Implicit-GEMM convolution dgrad and wgrad (ncudnn.kernels.conv) against the float64 oracle."""
import numpy as np
from numba import cuda
import pytest

from ncudnn import reference as R
from ncudnn.kernels.runtime import dtypes as dt
from ncudnn.kernels.conv import geometry, make_conv_dgrad, make_conv_wgrad, packed_strides
from ncudnn.kernels.gemm import CONFIGS, GemmConfig
from ncudnn.testing import assert_close, poison_value, random, size



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

CFG = size(GemmConfig(BLOCK_M=16, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0),
           CONFIGS[0])
WCFG = size(GemmConfig(BLOCK_M=8, BLOCK_N=16, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0),
            CONFIGS[0])


def _setup(rng, x_shape, w_shape, layout, dtype, kw):
    x, w = random(rng, x_shape, dtype), random(rng, w_shape, dtype)
    y_shape = R.conv_output_shape(x_shape, w_shape, **{k: v for k, v in kw.items() if k != "cross_correlation"})
    dy = random(rng, y_shape, dtype)
    (fx, sx), (fw, sw), (fdy, sy) = (to_layout(dt.to_storage(a), layout) for a in (x, w, dy))
    g = geometry(x_shape, w_shape, x_strides=sx, w_strides=sw, y_strides=sy, **kw)
    return x, w, dy, fx, fw, fdy, g


def dgrad_case(rng, x_shape, w_shape, layout="nchw", precomp=True, dtype="float32", beta=0.0, **kw):
    x, w, dy, _, fw, fdy, g = _setup(rng, x_shape, w_shape, layout, dtype, kw)
    ref = R.conv_dgrad(dy, w, x_shape, **kw)
    nhwc = layout == "nhwc"
    k = make_conv_dgrad(CFG, g.stride, (dtype,) * 3, order="rsc" if nhwc else "crs",
                        a_fast="k" if nhwc else "outer", precomp=precomp)
    dx0 = random(rng, x_shape, dtype)
    if beta:
        dx = to_layout(dt.to_storage(dx0), layout)[0].copy()
        ref = ref + beta * dx0.astype(np.float64)
    else:
        dx = to_layout(dt.to_storage(np.full(x_shape, poison_value(np.float32), np.float32).astype(dtype)),
                       layout)[0].copy()
    k.run(g, fdy, fw, dx, table=k.make_table(g) if precomp else None, beta=beta)
    return dt.from_storage(from_layout(dx, x_shape, layout), dtype), ref


@pytest.mark.parametrize("precomp", [True, False])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_dgrad_strided_dilated(rng, precomp, layout):
    got, ref = dgrad_case(rng, size((2, 3, 7, 6), (8, 64, 28, 28)), size((4, 3, 3, 2), (64, 64, 3, 3)),
                          layout, precomp, stride=(2, 3), pre_pad=(1, 0), post_pad=(0, 1), dilation=(1, 2))
    assert_close(got, ref, "float32")


def test_dgrad_groups_convolution_mode_beta(rng):
    got, ref = dgrad_case(rng, size((1, 4, 5, 6), (8, 64, 28, 28)), size((6, 2, 3, 3), (64, 32, 3, 3)),
                          groups=2, pre_pad=1, post_pad=1, cross_correlation=False, beta=0.5)
    assert_close(got, ref, "float32")


def test_dgrad_1d_3d_and_bf16(rng):
    import ml_dtypes  # noqa: F401
    got, ref = dgrad_case(rng, size((2, 3, 9), (8, 64, 100)), size((2, 3, 3), (64, 64, 3)),
                          stride=2, pre_pad=1, post_pad=1, dilation=2)
    assert_close(got, ref, "float32")
    got, ref = dgrad_case(rng, size((1, 2, 4, 4, 3), (2, 32, 8, 14, 14)), size((2, 2, 2, 3, 2), (32, 32, 3, 3, 3)),
                          "nhwc", dtype="bfloat16", stride=(2, 1, 1), pre_pad=(0, 1, 1), post_pad=(1, 1, 0))
    assert_close(got, ref, "bfloat16")


def wgrad_case(rng, x_shape, w_shape, layout="nchw", cfg=WCFG, dtype="float32", precomp=True, **kw):
    x, w, dy, fx, _, fdy, g = _setup(rng, x_shape, w_shape, layout, dtype, kw)
    ref = R.conv_wgrad(x, dy, w_shape, **kw)
    nhwc = layout == "nhwc"
    k = make_conv_wgrad(cfg, (dtype,) * 3, order="rsc" if nhwc else "crs",
                        a_fast="outer" if nhwc else "k", b_fast="outer" if nhwc else "k",
                        precomp=precomp)
    dw = to_layout(dt.to_storage(np.full(w_shape, poison_value(np.float32), np.float32).astype(dtype)),
                   layout)[0].copy()
    ws = np.full(k.workspace_size(g) // 4, np.nan, np.float32) if k.workspace_size(g) else None
    if cfg.SPLIT_K > 1 and cfg.SPLIT_MODE == "workspace":
        M, N, _ = g.gemm_wgrad()
        assert k.workspace_size(g) == 4 * g.G * cfg.SPLIT_K * M * N
    table = k.make_table(g) if precomp else None
    if precomp:
        assert table.nbytes == k.table_size(g) == 12 * g.N * int(np.prod(g.OPQ))  # 3 int32 per (n, o, p, q)
    # device arrays: dw is several launch arguments (output, bias and residual slots); host arrays would
    # each get their own device copy, copied back in turn over the written result on a real GPU
    ddw = cuda.to_device(dw)
    dev = lambda a: None if a is None else cuda.to_device(a)  # noqa: E731
    k.run(g, dev(fx), dev(fdy), ddw, workspace=dev(ws), table=dev(table))
    return dt.from_storage(from_layout(ddw.copy_to_host(), w_shape, layout), dtype), ref


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("split", [(1, "workspace", True), (3, "workspace", True), (2, "atomic", True),
                                   (2, "workspace", False)])
def test_wgrad_split(rng, layout, split):
    cfg = WCFG.replace(SPLIT_K=split[0], SPLIT_MODE=split[1])
    got, ref = wgrad_case(rng, size((2, 3, 6, 5), (8, 64, 28, 28)), size((4, 3, 3, 2), (64, 64, 3, 3)),
                          layout, cfg, precomp=split[2], stride=(2, 1), pre_pad=(1, 0), post_pad=(0, 1),
                          dilation=(1, 2))
    assert_close(got, ref, "float32")


def test_wgrad_groups_convolution_mode_1d_3d(rng):
    got, ref = wgrad_case(rng, size((2, 4, 5, 5), (8, 64, 28, 28)), size((6, 2, 3, 3), (64, 32, 3, 3)),
                          groups=2, pre_pad=1, post_pad=1, cross_correlation=False)
    assert_close(got, ref, "float32")
    got, ref = wgrad_case(rng, size((2, 3, 9), (8, 64, 100)), size((2, 3, 3), (64, 64, 3)),
                          stride=2, pre_pad=1, post_pad=0, dilation=2)
    assert_close(got, ref, "float32")
    got, ref = wgrad_case(rng, size((1, 2, 4, 4, 3), (2, 32, 8, 14, 14)), size((2, 2, 2, 3, 2), (32, 32, 3, 3, 3)),
                          "nhwc", stride=(2, 1, 1), pre_pad=(0, 1, 1), post_pad=(1, 1, 0))
    assert_close(got, ref, "float32")


def test_dgrad_stride_must_match_kernel():
    g = geometry((1, 2, 6, 6), (2, 2, 3, 3), stride=2)
    k = make_conv_dgrad(CFG, (1, 1, 1))
    with pytest.raises(ValueError, match="stride"):
        k.run(g, np.ones(8, np.float32), np.ones(36, np.float32), np.ones(72, np.float32))
