"""Forward output dims of convolution and pooling against hand-computed values (and their BAD_PARAMs)."""
import pytest

import ncudnn
import ncudnn.legacy as L

from .conftest import fdesc, tdesc

S = ncudnn.cudnnStatus_t
OK, BAD = S.CUDNN_STATUS_SUCCESS, S.CUDNN_STATUS_BAD_PARAM


def conv2d(pad, stride, dil, groups=1):
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnSetConvolution2dDescriptor(c, *pad, *stride, *dil, 1, 0) == (OK,)
    assert L.cudnnSetConvolutionGroupCount(c, groups) == (OK,)
    return c


@pytest.mark.parametrize("x, w, pad, stride, dil, groups, want", [
    # mnistCUDNN conv1: 28x28, 5x5 filter, no padding -> 24x24
    ((1, 1, 28, 28), (20, 1, 5, 5), (0, 0), (1, 1), (1, 1), 1, (1, 20, 24, 24)),
    # 'same' 3x3: 1 + (7 + 2 - 3) / 1 = 7
    ((2, 3, 7, 9), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, (2, 4, 7, 9)),
    # stride 2: 1 + (7 + 2 - 3) // 2 = 4;  1 + (9 + 0 - 3) // 2 = 4
    ((2, 3, 7, 9), (4, 3, 3, 3), (1, 0), (2, 2), (1, 1), 1, (2, 4, 4, 4)),
    # dilation 2: effective filter 5: 1 + (10 - 5) // 1 = 6;  1 + (8 + 4 - 5) // 3 = 3
    ((1, 2, 10, 8), (3, 2, 3, 3), (0, 2), (1, 3), (2, 2), 1, (1, 3, 6, 3)),
    # grouped: C = 6 = 2 groups x 3 filter channels
    ((1, 6, 5, 5), (4, 3, 1, 1), (0, 0), (1, 1), (1, 1), 2, (1, 4, 5, 5)),
])
def test_conv2d_output_dim(x, w, pad, stride, dil, groups, want):
    c = conv2d(pad, stride, dil, groups)
    assert L.cudnnGetConvolution2dForwardOutputDim(c, tdesc(x), fdesc(w)) == (OK,) + want
    assert L.cudnnGetConvolutionNdForwardOutputDim(c, tdesc(x), fdesc(w), 4) == (OK, list(want))


def test_conv3d_output_dim():
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnSetConvolutionNdDescriptor(c, 3, [1, 0, 2], [2, 1, 1], [1, 1, 2], 1, 0) == (OK,)
    # d: 1 + (5 + 2 - 3) // 2 = 3;  h: 1 + (6 - 3) = 4;  w: 1 + (7 + 4 - 5) = 7
    assert L.cudnnGetConvolutionNdForwardOutputDim(c, tdesc((2, 4, 5, 6, 7)), fdesc((8, 4, 3, 3, 3)), 5) == \
        (OK, [2, 8, 3, 4, 7])


def test_conv_output_dim_bad_param():
    c = conv2d((0, 0), (1, 1), (1, 1))
    for x, w, word in (((1, 3, 4, 4), (2, 2, 3, 3), "channels"),
                       ((1, 3, 2, 2), (2, 3, 3, 3), "smaller than the dilated filter"),
                       ((1, 3, 4, 4, 4), (2, 3, 3, 3, 3), "spatial dims")):
        st = L.cudnnGetConvolution2dForwardOutputDim(c, tdesc(x), fdesc(w))
        assert st[0] == BAD and word in ncudnn.cudnnGetLastErrorString()
    assert L.cudnnGetConvolutionNdForwardOutputDim(c, tdesc((1, 3, 4, 4)), fdesc((2, 3, 3, 3)), 5)[0] == BAD
    g = conv2d((0, 0), (1, 1), (1, 1), groups=4)
    assert L.cudnnGetConvolution2dForwardOutputDim(g, tdesc((1, 8, 4, 4)), fdesc((6, 2, 1, 1)))[0] == BAD


@pytest.mark.parametrize("x, win, pad, stride, want", [
    ((1, 20, 24, 24), (2, 2), (0, 0), (2, 2), (1, 20, 12, 12)),        # mnistCUDNN pool1
    ((2, 3, 7, 7), (3, 3), (1, 1), (2, 2), (2, 3, 4, 4)),              # 1 + (7 + 2 - 3) // 2
    ((2, 3, 7, 6), (2, 3), (0, 1), (1, 2), (2, 3, 6, 3)),              # 1 + 5 // 1;  1 + (6 + 2 - 3) // 2
])
def test_pooling2d_output_dim(x, win, pad, stride, want):
    _, p = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPooling2dDescriptor(p, 0, 0, *win, *pad, *stride) == (OK,)
    assert L.cudnnGetPooling2dForwardOutputDim(p, tdesc(x)) == (OK,) + want
    assert L.cudnnGetPoolingNdForwardOutputDim(p, tdesc(x), 4) == (OK, list(want))


def test_pooling_nd_output_dim_and_bad_param():
    _, p = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPoolingNdDescriptor(p, 1, 0, 3, [2, 3, 2], [0, 1, 1], [2, 2, 1]) == (OK,)
    # 1 + (4 - 2) // 2 = 2;  1 + (5 + 2 - 3) // 2 = 3;  1 + (3 + 2 - 2) = 4
    assert L.cudnnGetPoolingNdForwardOutputDim(p, tdesc((1, 2, 4, 5, 3)), 5) == (OK, [1, 2, 2, 3, 4])
    assert L.cudnnGetPoolingNdForwardOutputDim(p, tdesc((1, 2, 4, 5)), 4)[0] == BAD
    assert L.cudnnGetPooling2dForwardOutputDim(p, tdesc((1, 2, 4, 5)))[0] == BAD
    _, q = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPooling2dDescriptor(q, 0, 0, 5, 5, 0, 0, 1, 1) == (OK,)
    assert L.cudnnGetPooling2dForwardOutputDim(q, tdesc((1, 1, 4, 4)))[0] == BAD
    assert "smaller than the window" in ncudnn.cudnnGetLastErrorString()
