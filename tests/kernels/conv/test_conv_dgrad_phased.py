"""Phased (sub-pixel) dgrad of strided convolutions (kernels.conv.dgrad_phased) against the float64
oracle: strides 2 and 3, dilation, asymmetric padding, groups, both modes, NCHW / NHWC, phases with
no tap (1x1 stride 2: epilogue of zero), 1-D / 3-D, bias + relu epilogue, beta blend."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as R
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.conv import geometry
from ncudnn.kernels.conv.dgrad_phased import make_conv_dgrad_phased, phases
from ncudnn.kernels.gemm import CONFIGS, GemmConfig
from ncudnn.testing import assert_close, poison_value, size
from ncudnn.types import cudnnPointwiseMode_t as PM
from test_conv_grad import from_layout, to_layout

CFG = size(GemmConfig(BLOCK_M=16, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0), CONFIGS[0])


def run_case(rng, xs, ws, layout, groups=1, spec=ep.EpilogueSpec(), beta=0.0, **kw):
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    ys = R.conv_output_shape(xs, ws, groups=groups, **{k: v for k, v in kw.items() if k != "cross_correlation"})
    dy = rng.uniform(-1, 1, ys).astype(np.float32)
    (fw, sw), (fdy, sy) = to_layout(w, layout), to_layout(dy, layout)
    dx0 = rng.uniform(-1, 1, xs).astype(np.float32) if beta else np.full(xs, poison_value(np.float32), np.float32)
    fdx, sx = to_layout(dx0, layout)
    g = geometry(xs, ws, groups=groups, x_strides=sx, w_strides=sw, y_strides=sy, **kw)
    k = make_conv_dgrad_phased(CFG, epilogue=spec, order="rsc" if layout == "nhwc" else "crs",
                               a_fast="k" if layout == "nhwc" else "outer")
    tab = k.make_table(g)
    assert tab.nbytes == max(k.table_size(g), 4)
    d_dx = cuda.to_device(fdx.copy())
    bias = rng.uniform(-1, 1, xs[1]).astype(np.float32)
    k.run(g, cuda.to_device(fdy), cuda.to_device(fw), d_dx, table=cuda.to_device(tab), beta=beta,
          bias=cuda.to_device(bias) if spec.bias_axis else None)
    ref = R.conv_dgrad(dy, w, xs, groups=groups, **kw)
    if beta:
        ref = ref + beta * dx0.astype(np.float64)
    return from_layout(d_dx.copy_to_host(), xs, layout), ref, bias, g


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_stride2_3x3_pad1(rng, layout):
    got, ref, _, g = run_case(rng, size((2, 3, 7, 6), (8, 64, 28, 28)), size((4, 3, 3, 3), (64, 64, 3, 3)), layout,
                              stride=2, pre_pad=1, post_pad=1)
    assert sum(len(p[2]) for p in phases(g)) == 9         # every tap in exactly one phase
    assert_close(got, ref, "float32")


def test_stride_2x3_dilated_asymmetric_grouped_convolution_mode_beta(rng):
    got, ref, _, _ = run_case(rng, (1, 4, 8, 9), (6, 2, 3, 2), "nhwc", groups=2, stride=(2, 3), pre_pad=(2, 0),
                              post_pad=(0, 1), dilation=(2, 1), cross_correlation=False, beta=0.5)
    assert_close(got, ref, "float32")


def test_1x1_stride2_empty_phases_run_the_epilogue(rng):
    spec = ep.EpilogueSpec((ep.bias("col"), ep.pointwise(PM.CUDNN_POINTWISE_RELU_FWD)))
    got, ref, bias, g = run_case(rng, (1, 3, 5, 4), (2, 3, 1, 1), "nchw", spec=spec, stride=2)
    assert [len(p[2]) for p in phases(g)] == [1, 0, 0, 0]
    assert_close(got, np.maximum(ref + bias.reshape(1, 3, 1, 1), 0), "float32")


def test_1d_and_3d(rng):
    got, ref, _, _ = run_case(rng, (2, 2, 9), (3, 2, 3), "nchw", stride=3, pre_pad=1, post_pad=2)
    assert_close(got, ref, "float32")
    got, ref, _, _ = run_case(rng, (1, 2, 4, 4, 3), (2, 2, 3, 2, 2), "nhwc", stride=(2, 2, 1), pre_pad=1, post_pad=0)
    assert_close(got, ref, "float32")
