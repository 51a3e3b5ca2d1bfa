"""The resample kernels' sm_90 compile cases: the generic pooling / interpolation kernels (:mod:`.generic`), the
direct pooling and upsampling kernels (:mod:`.direct`) and the shared-memory tile kernels (:mod:`.tile`).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ...types import cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM
from ..runtime.compile_check import register_compile_case
from ..runtime.dtypes import array_sig as a
from . import direct, generic, tile

MAX, AVG_INCLUDE, AVG_EXCLUDE = (RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                                 RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING)
NCHW, NHWC = (0, 1, 2, 3), (0, 2, 3, 1)
#: the pooling geometry of the direct and tile cases: 3x3 windows, stride 2, padding 1, 112x112 -> 56x56
POOL_X, POOL_Y, POOL_GEOMETRY = (32, 256, 112, 112), (32, 256, 56, 56), ((3, 3), (2, 2), (1, 1))


def packed(shape, order):
    """Strides of a packed tensor whose dimensions ``order`` lists from the outermost to the innermost."""
    strides, acc = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def channels_last(rank):
    """N, the spatial dimensions, then C."""
    return (0,) + tuple(range(2, rank)) + (1,)


def _generic():
    cases = [("maxpool3x3s2", RM.CUDNN_RESAMPLE_MAXPOOL, (32, 64, 112, 112), (3, 3), (2, 2),
              (1, 1), PAD.CUDNN_NEG_INF_PAD),
             ("avgpool_excl3x3", RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING, (32, 64, 56, 56),
              (3, 3), (1, 1), (1, 1), PAD.CUDNN_ZERO_PAD),
             ("bilinear_up2", RM.CUDNN_RESAMPLE_BILINEAR, (8, 32, 64, 64), (2, 2), (0.5, 0.5),
              (0.75, 0.75), PAD.CUDNN_EDGE_VAL_PAD),
             ("maxpool3d_2x2x2", RM.CUDNN_RESAMPLE_MAXPOOL, (8, 16, 8, 32, 32), (2, 2, 2),
              (2, 2, 2), (0, 0, 0), PAD.CUDNN_ZERO_PAD)]
    for name, mode, xs, w, s, p, pad in cases:
        ys = generic.output_shape(xs, w, s, p, p)
        for order, tag in ((tuple(range(len(xs))), "nchw"), (channels_last(len(xs)), "nhwc")):
            xst, yst = packed(xs, order), packed(ys, order)
            k, _ = generic._fwd_kernel(mode, xs, xst, ys, yst, yst, w, s, p, pad, False,
                                       "float16", "float16", "int8")
            register_compile_case(f"resample_{name}_{tag}_fwd", k,
                                  f"void({a('float16')}, {a('float16')}, {a('int8')})",
                                  max_registers=128)
            k, _ = generic._bwd_kernel(mode, xs, xst, ys, yst, yst, w, s, p, pad, "float16", "float16")
            register_compile_case(f"resample_{name}_{tag}_bwd", k,
                                  f"void({a('float16')}, {a('int8')}, {a('float16')})",
                                  max_registers=128)


def _direct():
    xs, ys, geo = POOL_X, POOL_Y, POOL_GEOMETRY
    for lay, vec, order in (("nhwc", 4, NHWC), ("nchw", 1, NCHW)):
        xst, yst = packed(xs, order), packed(ys, order)
        for mode, tag, pad in ((MAX, "max", PAD.CUDNN_NEG_INF_PAD), (AVG_INCLUDE, "avg", PAD.CUDNN_ZERO_PAD)):
            for index in ((None, "vec" if vec == 4 else "scalar") if mode == MAX else (None,)):
                k = direct.fwd_kernel(mode, vec, xs, xst, ys, yst, yst, *geo, pad, False, index,
                                      "float32", "float32", "int32", 256)[0]
                register_compile_case(f"rsdirect_{tag}3x3s2_{lay}_fwd{'_idx' if index else ''}", k,
                                      f"void({a('float32')}, {a('float32')}, {a('int32')})", max_registers=96)
                k = direct.bwd_kernel(mode, vec, xs, xst, ys, yst, yst, xst, *geo, pad, False, index,
                                      "float32", "float32", "float32", 256)[0]
                register_compile_case(f"rsdirect_{tag}3x3s2_{lay}_bwd{'_idx' if index else ''}", k,
                                      f"void({a('float32')}, {a('int32')}, {a('float32')}, {a('float32')})",
                                      max_registers=128)

    ux, uy = (8, 64, 56, 56), (8, 64, 112, 112)
    for mode, tag in ((RM.CUDNN_RESAMPLE_BILINEAR, "bilinear"), (RM.CUDNN_RESAMPLE_NEAREST, "nearest")):
        k = direct.fwd_kernel(mode, 4, ux, packed(ux, NHWC), uy, packed(uy, NHWC), packed(uy, NHWC),
                              (2, 2), (0.5, 0.5), (0.75, 0.75), PAD.CUDNN_EDGE_VAL_PAD, False, None,
                              "float32", "float32", "int32", 256)[0]
        register_compile_case(f"rsdirect_{tag}_up2_nhwc_fwd", k,
                              f"void({a('float32')}, {a('float32')}, {a('int32')})", max_registers=96)


def _tile():
    sig = "void(float32[::1], float32[::1], int32[::1])"
    bsig = "void(float32[::1], int32[::1], float32[::1], float32[::1])"
    xs, ys, geo = POOL_X, POOL_Y, POOL_GEOMETRY
    mx, av, ae = (MAX, "max", PAD.CUDNN_NEG_INF_PAD), (AVG_INCLUDE, "avg", PAD.CUDNN_ZERO_PAD), \
        (AVG_EXCLUDE, "avgex", PAD.CUDNN_ZERO_PAD)
    # (direction, layout, tile, (mode, tag, pad), index): the engine's AUTO choices and one NHWC forward tile
    cases = [("fwd", "nchw", (1, 4), m, i) for m, i in ((mx, False), (mx, True), (av, False), (ae, False))]
    cases += [("bwd", "nchw", (2, 8), m, i) for m, i in ((mx, False), (mx, True), (av, False), (ae, False))]
    cases += [("bwd", "nhwc", (2, 2), m, i) for m, i in ((mx, False), (mx, True), (av, False))]
    cases += [("fwd", "nhwc", (1, 2), mx, True), ("bwd", "nchw1", (2, 2), mx, True)]
    for d, lay, (th, tw), (mode, tag, pad), index in cases:
        order = NHWC if lay == "nhwc" else NCHW
        xst, yst = packed(xs, order), packed(ys, order)
        name = f"rstile_{tag}3x3s2_{lay}_{d}{th}x{tw}{'_idx' if index else ''}"
        if d == "fwd":
            k = tile.fwd_tile_kernel(mode, lay, th, tw, xs, xst, ys, yst, yst, *geo, pad, False, index, 256)[0]
            register_compile_case(name, k, sig, max_registers=128)
        else:
            k = tile.bwd_tile_kernel(mode, lay, th, tw, xs, xst, ys, yst, yst, xst, *geo, pad, False, index, 256)[0]
            register_compile_case(name, k, bsig, max_registers=128)


def register_cases():
    _direct()
    _generic()
    _tile()


register_cases()
