"""Convolution forward / backward data / backward filter / backward bias / bias+activation against the
oracle (on the engines when they are registered; otherwise the lowered graph in the oracle, then skip)."""
import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.testing import size

from .conftest import check_or_skip, dev, engines_for, fdesc, poisoned, tdesc

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
FA = ncudnn.cudnnConvolutionFwdAlgo_t
DA = ncudnn.cudnnConvolutionBwdDataAlgo_t
WA = ncudnn.cudnnConvolutionBwdFilterAlgo_t

#: (x dims, w dims, pad, stride, dilation, groups, mode)
CASES = [
    (size((1, 2, 5, 5), (4, 16, 28, 28)), size((3, 2, 3, 3), (32, 16, 3, 3)), (1, 1), (1, 1), (1, 1), 1, 1),
    (size((2, 2, 6, 5), (8, 32, 17, 19)), size((2, 2, 3, 2), (16, 32, 3, 2)), (0, 1), (2, 1), (1, 2), 1, 0),
    (size((1, 4, 4, 4), (4, 32, 14, 14)), size((4, 2, 1, 1), (64, 16, 1, 1)), (0, 0), (1, 1), (1, 1), 2, 1),
]
IDS = ["same3x3", "strided_dilated_conv", "grouped1x1"]


def conv_desc(pad, stride, dil, groups, mode, math=ncudnn.CUDNN_FMA_MATH):
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnSetConvolution2dDescriptor(c, *pad, *stride, *dil, mode, 0) == (OK,)
    assert L.cudnnSetConvolutionGroupCount(c, groups) == (OK,)
    assert L.cudnnSetConvolutionMathType(c, math) == (OK,)
    return c


def ref_kw(pad, stride, dil, groups, mode):
    return dict(stride=stride, pre_pad=pad, post_pad=pad, dilation=dil, groups=groups, cross_correlation=mode == 1)


def workspace(ret):
    st, n = ret
    if st != OK:
        return None, 0
    return (dev(np.zeros(max(n, 1), np.uint8)) if n else None), n


@pytest.mark.parametrize("xs, ws, pad, stride, dil, groups, mode", CASES, ids=IDS)
def test_conv_forward(handle, rng, xs, ws, pad, stride, dil, groups, mode):
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    yd = tdesc(ys)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    prior = rng.standard_normal(ys).astype(np.float32)
    algo = FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
    wsb, n = workspace(L.cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, c, yd, algo))
    y = dev(prior)
    ret = L.cudnnConvolutionForward(handle, 0.5, xd, dev(x), wd, dev(w), c, algo, wsb, n, -1.0, yd, y)
    ref = 0.5 * R.conv_fprop(x, w, **ref_kw(pad, stride, dil, groups, mode)) - prior
    check_or_skip(handle, ret, ["conv_fprop"], {"y": y}, {"y": ref}, {"x": x, "w": w, "y": prior}, {"alpha": 0.5},
                  tol=1e-5)


@pytest.mark.parametrize("xs, ws, pad, stride, dil, groups, mode", CASES[:2], ids=IDS[:2])
def test_conv_backward_data(handle, rng, xs, ws, pad, stride, dil, groups, mode):
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    dy, w = rng.standard_normal(ys).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    algo = DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1
    wsb, n = workspace(L.cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wd, tdesc(ys), c, xd, algo))
    dx = poisoned(xs)
    ret = L.cudnnConvolutionBackwardData(handle, 1.0, wd, dev(w), tdesc(ys), dev(dy), c, algo, wsb, n, 0.0, xd, dx)
    ref = R.conv_dgrad(dy, w, xs, **ref_kw(pad, stride, dil, groups, mode))
    check_or_skip(handle, ret, ["conv_dgrad"], {"dx": dx}, {"dx": ref}, {"dy": dy, "w": w}, tol=1e-5)


@pytest.mark.parametrize("xs, ws, pad, stride, dil, groups, mode", CASES[:2], ids=IDS[:2])
def test_conv_backward_filter(handle, rng, xs, ws, pad, stride, dil, groups, mode):
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    x, dy = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ys).astype(np.float32)
    prior = rng.standard_normal(ws).astype(np.float32)
    algo = WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1
    wsb, n = workspace(L.cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, tdesc(ys), c, wd, algo))
    dw = dev(prior)
    ret = L.cudnnConvolutionBackwardFilter(handle, 1.0, xd, dev(x), tdesc(ys), dev(dy), c, algo, wsb, n, 1.0, wd, dw)
    ref = R.conv_wgrad(x, dy, ws, **ref_kw(pad, stride, dil, groups, mode)) + prior
    check_or_skip(handle, ret, ["conv_wgrad"], {"dw": dw}, {"dw": ref}, {"x": x, "dy": dy, "dw": prior}, tol=1e-5)


def test_conv_backward_bias(handle, rng):
    shape = size((2, 3, 4, 5), (16, 64, 28, 28))
    dy = rng.standard_normal(shape).astype(np.float32)
    prior = rng.standard_normal((1, shape[1], 1, 1)).astype(np.float32)
    db = dev(prior)
    bad = L.cudnnConvolutionBackwardBias(handle, 1.0, tdesc(shape), dev(dy), 0.0, tdesc((1, shape[1] + 1, 1, 1)), db)
    assert bad == (S.CUDNN_STATUS_BAD_PARAM,)
    ret = L.cudnnConvolutionBackwardBias(handle, 2.0, tdesc(shape), dev(dy), 0.5, tdesc((1, shape[1], 1, 1)), db)
    ref = 2.0 * R.conv_backward_bias(dy) + 0.5 * prior
    check_or_skip(handle, ret, ["reduction"], {"db": db}, {"db": ref}, {"dy": dy, "db": prior}, {"alpha": 2.0},
                  tol=1e-5)


@pytest.mark.parametrize("act", [ncudnn.CUDNN_ACTIVATION_RELU, ncudnn.CUDNN_ACTIVATION_IDENTITY])
@pytest.mark.parametrize("alpha2", [0.0, 0.5])
def test_conv_bias_activation(handle, rng, act, alpha2):
    xs, ws, pad, stride, dil, groups, mode = CASES[0]
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    yd, bd = tdesc(ys), tdesc((1, ys[1], 1, 1))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    z, bias = rng.standard_normal(ys).astype(np.float32), rng.standard_normal((1, ys[1], 1, 1)).astype(np.float32)
    _, ad = L.cudnnCreateActivationDescriptor()
    L.cudnnSetActivationDescriptor(ad, act, 0, 0.0)
    algo = FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
    wsb, n = workspace(L.cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, c, yd, algo))
    y = dev(z)  # z and y may share a buffer, as cuDNN allows
    ret = L.cudnnConvolutionBiasActivationForward(handle, 1.5, xd, dev(x), wd, dev(w), c, algo, wsb, n, alpha2, yd, y,
                                                  bd, dev(bias), ad, yd, y)
    ref = R.conv_bias_activation_forward(x, w, z, bias, act, alpha1=1.5, alpha2=alpha2,
                                         **ref_kw(pad, stride, dil, groups, mode))
    check_or_skip(handle, ret, ["conv_fprop"], {"y": y}, {"y": ref}, {"x": x, "w": w, "z": z, "bias": bias, "y": z},
                  {"alpha1": 1.5}, tol=1e-5)


def test_conv_bias_activation_restrictions(handle):
    xs, ws, pad, stride, dil, groups, mode = CASES[0]
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    yd, bd = tdesc(ys), tdesc((1, ys[1], 1, 1))
    bufs = [dev(np.ones(s, np.float32)) for s in (xs, ws, ys, (1, ys[1], 1, 1))]
    _, ad = L.cudnnCreateActivationDescriptor()
    for mode_, algo, word in ((ncudnn.CUDNN_ACTIVATION_TANH, 1, "only RELU and IDENTITY"),
                              (ncudnn.CUDNN_ACTIVATION_IDENTITY, 0, "IMPLICIT_PRECOMP_GEMM")):
        L.cudnnSetActivationDescriptor(ad, mode_, 0, 0.0)
        ret = L.cudnnConvolutionBiasActivationForward(handle, 1.0, xd, bufs[0], wd, bufs[1], c, algo, None, 0, 0.0,
                                                      None, None, bd, bufs[3], ad, yd, bufs[2])
        assert ret == (S.CUDNN_STATUS_NOT_SUPPORTED,) and word in ncudnn.cudnnGetLastErrorString()


def test_conv_shape_errors_and_workspace(handle, rng):
    xs, ws, pad, stride, dil, groups, mode = CASES[0]
    c = conv_desc(pad, stride, dil, groups, mode)
    xd, wd = tdesc(xs), fdesc(ws)
    ys = L.cudnnGetConvolution2dForwardOutputDim(c, xd, wd)[1:]
    wrong = tdesc((ys[0], ys[1] + 1) + tuple(ys[2:]))
    bufs = [dev(np.ones(s, np.float32)) for s in (xs, ws, ys)]
    ret = L.cudnnConvolutionForward(handle, 1.0, xd, bufs[0], wd, bufs[1], c, 1, None, 0, 0.0, wrong, bufs[2])
    assert ret == (S.CUDNN_STATUS_BAD_PARAM,) and "yDesc dims" in ncudnn.cudnnGetLastErrorString()
    ret = L.cudnnConvolutionForward(handle, 1.0, xd, None, wd, bufs[1], c, 1, None, 0, 0.0, tdesc(ys), bufs[2])
    assert ret == (S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER,)
    ret = L.cudnnConvolutionForward(handle, 1.0, xd, bufs[0], wd, bufs[1], c, 8, None, 0, 0.0, tdesc(ys), bufs[2])
    assert ret == (S.CUDNN_STATUS_BAD_PARAM,) and "algo" in ncudnn.cudnnGetLastErrorString()
    if not engines_for("conv_fprop"):
        ret = L.cudnnConvolutionForward(handle, 1.0, xd, bufs[0], wd, bufs[1], c, 1, None, 0, 0.0, tdesc(ys), bufs[2])
        assert ret == (S.CUDNN_STATUS_NOT_SUPPORTED,)
        assert "no engine runs the conv_fprop subgraph" in ncudnn.cudnnGetLastErrorString()
