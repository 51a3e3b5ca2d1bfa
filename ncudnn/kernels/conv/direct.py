"""Direct convolution forward: one thread per output element, the (c in group, t, r, s) reduction
written out in registers. For depthwise convolutions (groups == C) and tiny channel counts, where
an implicit GEMM has an N (= K/G) or K (= C/G*T*R*S) dimension too small to fill a tile.

Every size, stride, padding, dilation and element stride is a compile-time constant (the kernel is
generated per geometry, like CUTLASS's fixed-shape kernels): the flat thread index is split into
(n, k, o, p, q) by constant divisors in y's memory order, so neighbouring threads write neighbouring
addresses (NHWC: neighbouring channels, whose x reads are neighbouring too), and the tap loops are
unrolled with constant offsets. Out-of-range taps (padding) are skipped, not multiplied.

``make_direct_fprop(g, dtypes, epilogue)`` returns the kernel
``kernel(x, w, y, bias, res, alpha, beta)`` (flat 1-D storage arrays; alpha / beta float64) to
launch on ``grid(g, block)`` blocks of ``block`` threads; the epilogue is
``ncudnn.kernels.pointwise.epilogue`` (bias per output channel, pointwise chain, one residual).
"""
from numba import cuda, float32, float64, int64, uint64

from ..runtime import dtypes
from ..pointwise import epilogue as ep

_CACHE = {}


def _decompose_lines(sizes_strides):
    """Source lines splitting ``i`` into the named coordinates, innermost (smallest y stride) first."""
    lines = ["    rem = i"] + [f"    {name} = 0" for name, size, _ in sizes_strides if size == 1]
    order = sorted([c for c in sizes_strides if c[1] != 1], key=lambda t: (t[2], t[0]))
    if not order:
        return lines
    for j, (name, size, _) in enumerate(order):
        if j == len(order) - 1:
            lines.append(f"    {name} = rem")
        else:
            lines += [f"    {name} = rem % {size}", f"    rem = rem // {size}"]
    return lines


def source(g, bias_stride=1, res_strides=None):
    """Kernel source text for geometry ``g`` (kernels.conv.geometry.ConvGeometry)."""
    D, H, W = g.DHW
    T, R, S = g.TRS
    O, P, Q = g.OPQ
    sd, sh, sw = g.stride
    pd, ph, pw = g.pad
    dd, dh, dw = g.dil
    sx, sf, sy = g.x_strides, g.w_strides, g.y_strides
    rs = tuple(res_strides) if res_strides else sy
    Cg, Kg = g.Cg, g.Kg
    total = g.N * g.K * O * P * Q
    coords = [("n", g.N, sy[0]), ("k", g.K, sy[1]), ("o", O, sy[2]), ("p", P, sy[3]), ("q", Q, sy[4])]
    L = ["def kernel(x, w, y, bias, res, alpha, beta):",
         "    i = cuda.grid(1)",
         f"    if i >= {total}:",
         "        return"]
    L += _decompose_lines(coords)
    L += [f"    grp = k // {Kg}" if Kg > 1 else "    grp = k",
          f"    d0 = o * {sd} - {pd}",
          f"    h0 = p * {sh} - {ph}",
          f"    w0 = q * {sw} - {pw}",
          "    acc = ACC(0)",
          f"    for cg in range({Cg}):",
          f"        xb = n * {sx[0]} + (grp * {Cg} + cg) * {sx[1]}",
          f"        wb = k * {sf[0]} + cg * {sf[1]}"]
    ind = "        "
    for name, lo, size, step, ext, xs, ws, fs in (("d", "d0", T, dd, D, sx[2], sf[2], "t"),
                                                  ("h", "h0", R, dh, H, sx[3], sf[3], "r"),
                                                  ("ww", "w0", S, dw, W, sx[4], sf[4], "s")):
        tap = f"({size - 1} - {fs})" if g.flip else fs
        L += [f"{ind}for {fs} in range({size}):",
              f"{ind}    {name} = {lo} + {fs} * {step}",
              f"{ind}    if {name} >= 0 and {name} < {ext}:",
              f"{ind}        xb_{name} = {'xb' if name == 'd' else ('xb_d' if name == 'h' else 'xb_h')} + {name} * {xs}",
              f"{ind}        wb_{name} = {'wb' if name == 'd' else ('wb_d' if name == 'h' else 'wb_h')} + {tap} * {ws}"]
        ind += "        "
    L += [f"{ind}acc += ldx(x, uint64(xb_ww)) * ldw(w, uint64(wb_ww))",
          f"    y_off = n * {sy[0]} + k * {sy[1]} + o * {sy[2]} + p * {sy[3]} + q * {sy[4]}",
          f"    r_off = n * {rs[0]} + k * {rs[1]} + o * {rs[2]} + p * {rs[3]} + q * {rs[4]}",
          f"    epi(acc, y, uint64(y_off), bias, uint64(k * {bias_stride}), res, uint64(r_off), "
          "FT(alpha), FT(beta))"]
    return "\n".join(L) + "\n"


class DirectFprop:
    """A compiled-on-demand direct fprop for one geometry, dtypes and epilogue."""

    def __init__(self, g, dtypes_=("float32",) * 3, epilogue=ep.EpilogueSpec(), bias_stride=1, res_strides=None):
        from .common import normalize
        self.g = g
        self.dtypes, self.ftype, self.spec, bias_dt, res_dt = normalize(dtypes_, epilogue)
        self.src = source(g, bias_stride, res_strides)
        acc = float64 if self.ftype == "float64" else float32
        glb = {"cuda": cuda, "uint64": uint64, "int64": int64, "ACC": acc, "FT": acc,
               "ldx": dtypes.loader(self.dtypes[0], self.ftype), "ldw": dtypes.loader(self.dtypes[1], self.ftype),
               "epi": ep.build(self.spec, bias_dt, res_dt).fn}
        exec(compile(self.src, "<conv_direct>", "exec"), glb)
        self.py_func = glb["kernel"]
        self.kernel = cuda.jit(self.py_func)

    @property
    def total(self):
        O, P, Q = self.g.OPQ
        return self.g.N * self.g.K * O * P * Q

    def grid(self, block):
        return -(-self.total // block)

    def run(self, x, w, y, *, bias=None, residual=None, alpha=1.0, beta=0.0, block=256, stream=0):
        """y = epilogue(alpha * conv(x, w) + beta * y) on flat storage arrays."""
        from .common import check_tensor, dummy
        g = self.g
        check_tensor("x", x, (g.N, g.C) + g.DHW, g.x_strides)
        check_tensor("w", w, (g.K, g.Cg) + g.TRS, g.w_strides)
        check_tensor("y", y, (g.N, g.K) + g.OPQ, g.y_strides)
        if self.spec.bias_axis and bias is None:
            raise ValueError("epilogue has a bias step: pass bias")
        if self.spec.has_residual and residual is None:
            raise ValueError("epilogue has a residual step: pass residual")
        bias = bias if bias is not None else dummy(self.dtypes[2])
        residual = residual if residual is not None else dummy(self.dtypes[2])
        self.kernel[self.grid(block), block, stream](x, w, y, bias, residual, float(alpha), float(beta))


def make_direct_fprop(g, dtypes_=("float32",) * 3, epilogue=ep.EpilogueSpec(), bias_stride=1, res_strides=None):
    key = (g, tuple(dtypes_), epilogue, bias_stride, tuple(res_strides) if res_strides else None)
    if key not in _CACHE:
        _CACHE[key] = DirectFprop(g, dtypes_, epilogue, bias_stride, res_strides)
    return _CACHE[key]
