"""The conv geometry's one source: the output sizes come from the IR node (``ir.ops.conv_common.out_size``
through ``node.output_spatial()``), and conv_common.conv_geometry (the written-out geometry of a conv
node, its output sizes the node's) equals kernels.conv.geometry: equal ConvGeometry objects, or the same
ValueError, on fresh random problems (1-3 spatial dims, NCHW / NHWC / odd strides, groups, dilation,
asymmetric padding, both modes) and on inputs that take the general path (lists, numpy ints, scalars, bad
lengths, empty outputs). The backend's finalize checks and the engines' ConvProblem read the same."""
from dataclasses import fields
from types import SimpleNamespace as NS

import numpy as np
import pytest

from conv_rank_graphs import conv_graph
from ncudnn.engines import api
from ncudnn.engines.conv.common import conv_geometry, conv_problem
from ncudnn.ir.ops.conv_common import out_spatial
from ncudnn.kernels.conv import geometry
from ncudnn.kernels.conv.geometry import packed_strides
from ncudnn.types import cudnnConvolutionMode_t as CM


def _node(stride, pre, post, dil, groups, cross):
    return NS(stride=stride, pre_padding=pre, post_padding=post, dilation=dil, groups=groups,
              mode=CM.CUDNN_CROSS_CORRELATION if cross else CM.CUDNN_CONVOLUTION)


def _both(x, w, y, node):
    # a stand-in node: its output sizes as an IR node gives them (asked only of plain-int valid attributes)
    node.output_spatial = lambda: out_spatial(x.dims[2:], w.dims[2:], node.stride, node.pre_padding,
                                              node.post_padding, node.dilation)
    try:
        ref = geometry(x.dims, w.dims, stride=node.stride, pre_pad=node.pre_padding, post_pad=node.post_padding,
                       dilation=node.dilation, groups=node.groups,
                       cross_correlation=node.mode == CM.CUDNN_CROSS_CORRELATION, x_strides=x.strides,
                       w_strides=w.strides, y_strides=y.strides)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            conv_geometry(x, w, y, node)
        assert str(got.value) == str(e)
        return None
    got = conv_geometry(x, w, y, node)
    assert got == ref and hash(got) == hash(ref) and repr(got) == repr(ref)
    for f in fields(ref):
        a, b = getattr(got, f.name), getattr(ref, f.name)
        assert a == b and type(a) is type(b), f.name
        if isinstance(a, tuple):
            assert all(type(u) is type(v) for u, v in zip(a, b)), f.name
    assert got.gemm_fprop() == ref.gemm_fprop() and got.gemm_wgrad() == ref.gemm_wgrad()
    assert got.Cg == ref.Cg and got.taps == ref.taps
    return got


def _problem(rng, nsp, layout):
    G = int(rng.choice([1, 1, 2, 4]))
    C, K = G * int(rng.integers(1, 9)), G * int(rng.integers(1, 9))
    N = int(rng.integers(1, 40))
    S = [int(rng.integers(1, 30)) for _ in range(nsp)]
    F = [int(rng.integers(1, 6)) for _ in range(nsp)]
    s = tuple(int(rng.integers(1, 4)) for _ in range(nsp))
    d = tuple(int(rng.integers(1, 3)) for _ in range(nsp))
    pre = tuple(int(rng.integers(0, 4)) for _ in range(nsp))
    post = tuple(int(rng.integers(0, 4)) for _ in range(nsp))
    xd, wd = (N, C, *S), (K, C // G, *F)
    out = [(S[i] + pre[i] + post[i] - ((F[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nsp)]
    yd = (N, K, *[max(o, 1) for o in out])
    lay = layout if layout != "odd" else "nchw"
    xs, ws, ys = packed_strides(xd, lay), packed_strides(wd, lay), packed_strides(yd, lay)
    if layout == "odd":
        xs = tuple(v * 3 for v in xs)
    x, w, y = NS(dims=xd, strides=xs), NS(dims=wd, strides=ws), NS(dims=yd, strides=ys)
    return x, w, y, _node(s, pre, post, d, G, bool(rng.integers(0, 2)))


@pytest.mark.parametrize("nsp", [1, 2, 3])
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "odd"])
def test_written_out_geometry_equals_the_kernel_geometry(rng, nsp, layout):
    valid = 0
    for _ in range(150):
        valid += _both(*_problem(rng, nsp, layout)) is not None
    assert valid > 50


def test_general_path_inputs_give_the_same_answer(rng):
    x, w, y, node = _problem(rng, 2, "nhwc")
    # lists, numpy integers, scalar parameters, a wrong length, bad groups, an empty output, bad strides
    cases = [
        (x, w, y, _node(list(node.stride), list(node.pre_padding), node.post_padding, node.dilation, node.groups,
                        True)),
        (NS(dims=tuple(np.int64(v) for v in x.dims), strides=x.strides), w, y, node),
        (x, w, y, _node(1, 0, 0, 1, node.groups, False)),
        (x, w, y, _node((1, 1, 1), node.pre_padding, node.post_padding, node.dilation, node.groups, True)),
        (x, w, y, _node(node.stride, node.pre_padding, node.post_padding, node.dilation, 3 * node.groups + 1, True)),
        (x, w, y, _node(node.stride, (-1, 0), node.post_padding, node.dilation, node.groups, True)),
        (x, w, y, _node((0, 1), node.pre_padding, node.post_padding, node.dilation, node.groups, True)),
        (NS(dims=x.dims[:2] + (1, 1), strides=packed_strides(x.dims[:2] + (1, 1))),
         NS(dims=w.dims[:2] + (5, 5), strides=packed_strides(w.dims[:2] + (5, 5))), y,
         _node((1, 1), (0, 0), (0, 0), (1, 1), node.groups, True)),
        (NS(dims=x.dims, strides=x.strides[:3]), w, y, node),
        (NS(dims=x.dims, strides=()), w, y, node),
        (x, w, y, _node(node.stride, node.pre_padding, node.post_padding, node.dilation, True, True)),
    ]
    for args in cases:
        _both(*args)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_engine_geometry_is_the_ir_nodes(kind):
    """ConvProblem's output sizes are the IR node's (one formula): equal to the graph's y and to out_size."""
    for n, c, h, k, r, stride in ((2, 8, 7, 4, 3, 2), (1, 4, 9, 8, 1, 1), (3, 4, 6, 4, 5, 3)):
        sub = api.problem(conv_graph(kind, n, c, h, k, r, stride, False, "f32", False))
        node = sub.anchor
        x, w, y = node.conv_tensors()
        want = out_spatial(x.dims[2:], w.dims[2:], node.stride, node.pre_padding, node.post_padding, node.dilation)
        assert node.output_spatial() == want == tuple(y.dims[2:])
        assert conv_problem(sub).g.OPQ[1:] == want
