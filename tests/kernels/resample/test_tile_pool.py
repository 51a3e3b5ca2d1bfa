"""Register-tiled 2D pooling kernels (ncudnn.kernels.resample.tile): forward (with / without index) and
the gather backward (routed by index, recomputed from x, average including / excluding padding), NCHW
(4-column chunks) and NHWC (4-channel vectors), several tiles, against the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.resample import generic as rs
from ncudnn.kernels.resample import tile as rv
from ncudnn.kernels.primitives.warp import launch
from ncudnn.testing import assert_close
from ncudnn.types import cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM

MAX, AIN, AEX = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                 RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
BLOCK = 32


def packed(shape, order):
    st, acc = [0] * len(shape), 1
    for d in reversed(order):
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


LAY = {"nchw": (0, 1, 2, 3), "nchw1": (0, 1, 2, 3), "nhwc": (0, 2, 3, 1)}


def _flat(shape, strides):
    idx = np.zeros(shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[d] = shape[d]
        idx = idx + np.arange(shape[d]).reshape(sh) * s
    return idx.reshape(-1)


def _dev(a, st, dtype=np.float32):
    out = np.empty(a.size, dtype)
    out[_flat(a.shape, st)] = a.reshape(-1)
    return cuda.to_device(out)


def _host(d, shape, st):
    return d.copy_to_host()[_flat(shape, st)].reshape(shape)


def _poison(n, dtype=np.float32):
    return cuda.to_device(np.full(n, np.nan if np.dtype(dtype).kind == "f" else -7, dtype))


def run_fwd(x, mode, lay, tile, w, s, p, pad, index, propagate=False):
    ys = rs.output_shape(x.shape, w, s, p, p)
    xst, yst = packed(x.shape, LAY[lay]), packed(ys, LAY[lay])
    ok, why = rv.tile_supported("fwd", mode, lay, *tile, x.shape, ys, w, s, p, pad, index)
    assert ok, why
    k, src, total = rv.fwd_tile_kernel(mode, lay, *tile, x.shape, xst, ys, yst, yst, w, s, p, pad, propagate,
                                       index, BLOCK)
    n = int(np.prod(ys))
    y, idx = _poison(n), _poison(n, np.int32)
    launch(k, -(-total // BLOCK), BLOCK, 0, _dev(x, xst), y, idx)
    return _host(y, ys, yst), _host(idx, ys, yst), idx, src


def run_bwd(x, dy, idx_dev, mode, lay, tile, w, s, p, pad, index):
    xst, yst = packed(x.shape, LAY[lay]), packed(dy.shape, LAY[lay])
    ok, why = rv.tile_supported("bwd", mode, lay, *tile, x.shape, dy.shape, w, s, p, pad, index)
    assert ok, why
    k, src, total = rv.bwd_tile_kernel(mode, lay, *tile, x.shape, xst, dy.shape, yst, yst, xst, w, s, p, pad,
                                       False, index, BLOCK)
    dx = _poison(x.size)
    launch(k, -(-total // BLOCK), BLOCK, 0, _dev(dy, yst), idx_dev if index else _poison(4, np.int32),
           _dev(x, xst), dx)
    return _host(dx, x.shape, xst), src


# (mode, pad, window, stride, pre-pad, x shape, forward tiles, backward tiles)
CASES = {
    "max3s2_neginf_nchw": (MAX, PAD.CUDNN_NEG_INF_PAD, (3, 3), (2, 2), (1, 1), "nchw", (2, 3, 8, 16),
                           [(1, 4), (2, 8)], [(2, 8), (4, 8)]),
    "max3s2_zero_nhwc": (MAX, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 2), (1, 1), "nhwc", (2, 8, 8, 4),
                         [(1, 2), (2, 1)], [(2, 2), (4, 4)]),
    "max2s2_nchw": (MAX, PAD.CUDNN_ZERO_PAD, (2, 2), (2, 2), (0, 0), "nchw", (1, 2, 4, 16), [(2, 4)], [(2, 8)]),
    "max3s1_nhwc": (MAX, PAD.CUDNN_NEG_INF_PAD, (3, 3), (1, 1), (1, 1), "nhwc", (1, 4, 5, 6), [(1, 2)], [(1, 2)]),
    "avgin3s2_nchw": (AIN, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 2), (1, 1), "nchw", (1, 3, 6, 16), [(1, 4)], [(2, 8)]),
    "avgex3s2_nhwc": (AEX, PAD.CUDNN_ZERO_PAD, (3, 3), (2, 2), (1, 1), "nhwc", (1, 4, 6, 6), [(1, 3)], [(2, 2)]),
    "avgex3s1_nchw": (AEX, PAD.CUDNN_ZERO_PAD, (3, 3), (1, 1), (1, 1), "nchw", (1, 2, 5, 8), [(1, 4)], [(1, 4)]),
    "avgex23_edge_nhwc": (AEX, PAD.CUDNN_EDGE_VAL_PAD, (2, 3), (2, 2), (1, 1), "nhwc", (1, 4, 6, 8), [(2, 2)],
                          [(2, 2)]),
    "max3s2_nchw1": (MAX, PAD.CUDNN_NEG_INF_PAD, (3, 3), (2, 2), (1, 1), "nchw1", (1, 3, 6, 10), [(1, 5), (3, 1)],
                     [(2, 2), (2, 10)]),
    "avgex3s1_nchw1": (AEX, PAD.CUDNN_ZERO_PAD, (3, 3), (1, 1), (1, 1), "nchw1", (1, 2, 5, 7), [(1, 7)], [(5, 1)]),
    "max32_s21_nhwc": (MAX, PAD.CUDNN_NEG_INF_PAD, (3, 2), (2, 1), (1, 1), "nhwc", (1, 4, 6, 6), [(3, 1), (1, 7)],
                       [(2, 2)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tile_pool_forward_backward(rng, case):
    mode, pad, w, s, p, lay, xs, ftiles, btiles = CASES[case]
    x = rng.standard_normal(xs).astype(np.float32)
    exp = ref.resample_forward(x, mode, w, s, p, p, pad)
    eidx = None
    if mode == MAX:
        exp, eidx = exp
    idx_dev = None
    for tile in ftiles:
        for index in ((False, True) if mode == MAX else (False,)):
            y, idx, idx_d, src = run_fwd(x, mode, lay, tile, w, s, p, pad, index)
            assert_close(y, exp, "float32", name=f"y {tile}")
            assert ("ld4(x" in src and "st4(y" in src) == (lay != "nchw1")
            if index:
                np.testing.assert_array_equal(idx, eidx)
                idx_dev = idx_d
            else:
                assert (idx == -7).all() and "idx" not in src.split("\n", 1)[1]
    dy = rng.standard_normal(exp.shape).astype(np.float32)
    edx = ref.resample_backward(dy, mode, w, s, p, p, xs, pad, index=eidx)
    for tile in btiles:
        for index in ((False, True) if mode == MAX else (False,)):
            dx, src = run_bwd(x, dy, idx_dev, mode, lay, tile, w, s, p, pad, index)
            assert_close(dx, edx, "float32", name=f"dx {tile} index={index}")
            assert ("st4(dx" in src and "ld4(dy" in src) == (lay != "nchw1")


@pytest.mark.parametrize("propagate", [False, True])
def test_tile_max_nan_forward_and_recompute(rng, propagate):
    """NaN semantics of the tiled argmax match the oracle (index and value), and the backward that
    recomputes the winners from x routes dy like the index does."""
    x = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 2:, 2:4] = np.nan
    x[0, 2, 0, 0] = np.nan
    x[0, 2, 0, 1] = x[0, 2, 1, 0] = x[0, 2, 1, 1] = -np.inf
    w, s, p = (2, 2), (2, 2), (0, 0)
    for lay in ("nchw", "nhwc"):
        y, idx, _, _ = run_fwd(x, MAX, lay, (1, 4), w, s, p, PAD.CUDNN_ZERO_PAD, True, propagate)
        ey, ei = ref.resample_forward(x, MAX, w, s, p, p, nan_propagation=int(propagate))
        np.testing.assert_array_equal(idx, ei)
        np.testing.assert_array_equal(y, ey.astype(np.float32))


def test_tile_supported_reasons():
    ok, why = rv.tile_supported("fwd", MAX, "nchw", 1, 4, (1, 1, 8, 14), (1, 1, 4, 7), (3, 3), (2, 2), (1, 1),
                                PAD.CUDNN_ZERO_PAD, False)
    assert not ok and "multiples of 4" in why
    ok, why = rv.tile_supported("bwd", MAX, "nchw", 2, 4, (1, 1, 8, 16), (1, 1, 4, 8), (3, 3), (2, 2), (1, 1),
                                PAD.CUDNN_ZERO_PAD, True)
    assert not ok and "TW / stride_w" in why
    ok, why = rv.tile_supported("bwd", MAX, "nhwc", 3, 2, (1, 4, 8, 8), (1, 4, 4, 4), (3, 3), (2, 2), (1, 1),
                                PAD.CUDNN_ZERO_PAD, True)
    assert not ok and "multiple of the stride" in why
    assert rv.tile_layout((1, 4, 8, 8), packed((1, 4, 8, 8), LAY["nhwc"])) == "nhwc"
    assert rv.tile_layout((1, 3, 8, 8), packed((1, 3, 8, 8), LAY["nchw"])) == "nchw"
    assert rv.tile_layouts((1, 3, 8, 8), packed((1, 3, 8, 8), LAY["nchw"])) == ("nchw", "nchw1")
    assert rv.tile_layout((1, 3, 8, 6), packed((1, 3, 8, 6), LAY["nchw"])) == "nchw1"
    assert rv.tile_layout((1, 3, 8, 6), (144, 48, 1, 8)) is None   # W not innermost


@pytest.mark.parametrize("lay,tile", [("nchw", (2, 8)), ("nhwc", (2, 2)), ("nchw1", (2, 2))])
def test_tile_sources_assign_every_name_once(lay, tile):
    """Straight-line sources with no reassigned name (numba's SSA passes are quadratic in those)."""
    import collections
    import re
    xs, ys = (2, 4, 16, 16), (2, 4, 8, 8)
    xst, yst = packed(xs, LAY[lay]), packed(ys, LAY[lay])
    for mode in (MAX, AIN, AEX):
        for index in (False, True):
            srcs = [rv._bwd_tile_source(mode, lay, *tile, xs, xst, ys, yst, yst, xst, (3, 3), (2, 2), (1, 1),
                                        PAD.CUDNN_NEG_INF_PAD, index, index, 64)[0],
                    rv._fwd_tile_source(mode, lay, 1, 4, xs, xst, ys, yst, yst, (3, 3), (2, 2), (1, 1),
                                        PAD.CUDNN_NEG_INF_PAD, index, index, 64)[0]]
            for src in srcs:
                names = collections.Counter()
                for line in src.splitlines()[1:]:
                    m = re.match(r"\s+([\w, ]+?) = ", line)
                    if m:
                        names.update(n.strip() for n in m.group(1).split(","))
                assert names and max(names.values()) == 1, [n for n, k in names.items() if k > 1]


def test_tile_kernels_use_the_vector_primitives():
    """The 16-byte helpers live with the device primitives (ncudnn.kernels.primitives.vec); the tiled and the
    direct resample kernels use those very objects."""
    from ncudnn.kernels.primitives import vec
    from ncudnn.kernels.resample import direct
    for name in ("ld4", "st4", "sel"):
        assert getattr(rv, name) is getattr(vec, name) is getattr(direct, name), name
