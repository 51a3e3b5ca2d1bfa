"""Direct convolution kernel (ncudnn.kernels.conv.direct) against the float64 oracle: depthwise and
tiny-channel problems, strides, asymmetric padding, dilation, groups, both modes, NCHW / NHWC."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as R
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.conv import geometry, packed_strides
from ncudnn.kernels.conv.direct import make_direct_fprop, source
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnPointwiseMode_t as PM


def _flat(a, layout):
    if layout == "nchw":
        return np.ascontiguousarray(a).ravel()
    return np.ascontiguousarray(np.moveaxis(a, 1, -1)).ravel()


def _unflat(f, shape, layout):
    if layout == "nchw":
        return f.reshape(shape)
    return np.moveaxis(f.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


def case(rng, xs, ws, layout, groups=1, epilogue=ep.EpilogueSpec(), **kw):
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    ys = R.conv_output_shape(xs, ws, **{k: v for k, v in kw.items() if k != "cross_correlation"}, groups=groups)
    g = geometry(xs, ws, groups=groups, x_strides=packed_strides(xs, layout), w_strides=packed_strides(ws, layout),
                 y_strides=packed_strides(ys, layout), **kw)
    k = make_direct_fprop(g, epilogue=epilogue)
    y = cuda.to_device(np.full(int(np.prod(ys)), poison_value(np.float32), np.float32))
    ref = R.conv_fprop(x, w, groups=groups, **kw)
    return k, x, w, y, ys, ref, g


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_depthwise_strided_padded_dilated(rng, layout):
    k, x, w, y, ys, ref, _ = case(rng, (2, 4, 6, 5), (4, 1, 3, 3), layout, groups=4, stride=(2, 1),
                                  pre_pad=(1, 0), post_pad=(0, 2), dilation=(1, 2))
    k.run(cuda.to_device(_flat(x, layout)), cuda.to_device(_flat(w, layout)), y)
    assert_close(_unflat(y.copy_to_host(), ys, layout), ref, "float32")


def test_tiny_channels_grouped_convolution_mode_bias_relu(rng):
    spec = ep.EpilogueSpec((ep.bias("col"), ep.pointwise(PM.CUDNN_POINTWISE_RELU_FWD)))
    k, x, w, y, ys, ref, _ = case(rng, (1, 6, 5, 5), (4, 3, 2, 3), "nhwc", groups=2, epilogue=spec, pre_pad=1,
                                  post_pad=1, cross_correlation=False)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    k.run(cuda.to_device(_flat(x, "nhwc")), cuda.to_device(_flat(w, "nhwc")), y, bias=cuda.to_device(b), alpha=0.5)
    expect = np.maximum(0.5 * ref + b.reshape(1, 4, 1, 1), 0)
    assert_close(_unflat(y.copy_to_host(), ys, "nhwc"), expect, "float32")


def test_1d_and_3d_depthwise_multiplier(rng):
    # depthwise with channel multiplier 2 (K = 2*C, groups = C), 1-D and 3-D
    for xs, ws, kw in (((2, 3, 9), (6, 1, 3), dict(stride=2, pre_pad=1, post_pad=1)),
                       ((1, 2, 3, 4, 4), (4, 1, 2, 2, 3), dict(pre_pad=(0, 1, 1), post_pad=(1, 0, 1)))):
        k, x, w, y, ys, ref, _ = case(rng, xs, ws, "nchw", groups=xs[1], **kw)
        k.run(cuda.to_device(_flat(x, "nchw")), cuda.to_device(_flat(w, "nchw")), y)
        assert_close(_unflat(y.copy_to_host(), ys, "nchw"), ref, "float32")


def test_source_has_constant_divisors_and_no_padding_multiplies():
    g = geometry((32, 64, 56, 56), (64, 1, 3, 3), groups=64, pre_pad=1, post_pad=1,
                 x_strides=packed_strides((32, 64, 56, 56), "nhwc"), w_strides=packed_strides((64, 1, 3, 3), "nhwc"),
                 y_strides=packed_strides((32, 64, 56, 56), "nhwc"))
    src = source(g)
    lines = src.splitlines()
    assert lines[5] == "    o = 0" and lines[6] == "    k = rem % 64"   # channels innermost (NHWC): coalesced
    assert "for cg in range(1)" in src and "if h >= 0 and h < 56" in src


_PTX = r"""
import ncudnn
from numba import cuda
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.conv import geometry, packed_strides
from ncudnn.kernels.conv.direct import make_direct_fprop
from ncudnn.types import cudnnPointwiseMode_t as PM
xs, ws = (32, 64, 56, 56), (64, 1, 3, 3)
g = geometry(xs, ws, groups=64, pre_pad=1, post_pad=1, x_strides=packed_strides(xs, "nhwc"),
             w_strides=packed_strides(ws, "nhwc"), y_strides=packed_strides(xs, "nhwc"))
k = make_direct_fprop(g, epilogue=ep.EpilogueSpec((ep.bias("col"), ep.pointwise(PM.CUDNN_POINTWISE_RELU_FWD))))
sig = "void(float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float64, float64)"
ptx = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))[0]
print("STATS", ptx.count("fma.rn.f32"), ptx.count("div.s64") + ptx.count("rem.s64"), ptx.count("ld.local"))
"""


@pytest.mark.slow
def test_depthwise_kernel_compiles_for_sm90_without_divisions():
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", _PTX], env=env, capture_output=True, text=True, timeout=600)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")]
    assert line, out.stderr[-2000:]
    fma, divs, local = (int(v) for v in line[0].split()[1:])
    assert fma >= 9 and divs == 0 and local == 0     # 3x3 taps unrolled; constant divisors; no stack
