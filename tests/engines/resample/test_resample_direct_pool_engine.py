"""Pooling through the engine API on the direct kernels (ncudnn.kernels.resample.direct): NHWC float32
16-byte vector path and NCHW, forward with / without index, backward routed by IDX and recomputed
from X, 2D / 3D, against the float64 oracle. GPU-only: timing of the issue-4 shape (N32 C256 112x112,
3x3 s2) forward and backward, printed with GB/s and torch in the same run."""
import math
import os

import numpy as np
import pytest

from ncudnn.engines import api
from ncudnn.ir import OpGraph, ResampleBwd, ResampleFwd
from ncudnn.testing import size
from ncudnn.types import cudnnDataType_t as DT, cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM

import membound_util as U
from test_norm_batch_engine import _execute

MAX, AIN, AEX = RM.CUDNN_RESAMPLE_MAXPOOL, RM.CUDNN_RESAMPLE_AVGPOOL, RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING
I32 = DT.CUDNN_DATA_INT32
SHAPE2D = size((2, 8, 6, 7), (8, 64, 56, 56))
SHAPE3D = size((1, 4, 4, 5, 5), (4, 32, 16, 28, 28))


def chlast(dims):
    """Packed channels-last strides (NHWC / NDHWC)."""
    st, acc = [0] * len(dims), 1
    for d in [1] + list(range(len(dims) - 1, 1, -1)) + [0]:
        st[d] = acc
        acc *= dims[d]
    return tuple(st)


def _out(x, w, s, p):
    return tuple(x[:2]) + tuple(math.floor((n + 2 * a - k) / t) + 1 for n, k, t, a in zip(x[2:], w, s, p))


def pool_graph(mode, xd, w, s, p, pad, layout, idx, bwd=None):
    """Forward node (IDX output when ``idx``), and optionally a backward node fed by IDX ("idx") or X ("x")."""
    lay = chlast if layout == "nhwc" else (lambda d: None)
    yd = _out(xd, w, s, p)
    x = U.t(1, xd, strides=lay(xd), name="x")
    outs = {"Y": U.t(2, yd, strides=lay(yd), name="y")}
    if idx:
        outs["IDX"] = U.t(3, yd, I32, lay(yd), "idx")
    geo = dict(mode=mode, spatial_dims=len(w), window=w, stride=s, pre_padding=p, post_padding=p, padding_mode=pad)
    nodes = [ResampleFwd("pool", {"X": x}, outs, **geo)]
    if bwd:
        ins = {"DY": U.t(20, yd, strides=lay(yd), name="dy")}
        if bwd == "idx":
            ins["IDX"] = outs["IDX"]
        else:
            ins["X"] = x
        nodes.append(ResampleBwd("pool_bwd", ins, {"DX": U.t(21, xd, strides=lay(xd), name="dx")}, **geo))
    return OpGraph(nodes).finalize()


def _kernel_names(plan):
    return [st.key.split(":")[0] for sp in plan.parts for st in getattr(sp, "steps", ())]


FAST_FWD, FAST_BWD = ("resample_direct_fwd", "resample_tile_fwd"), ("resample_direct_bwd", "resample_tile_bwd")
CASES = {
    "max_negpad_nhwc_idx": (MAX, (3, 3), (2, 2), (1, 1), PAD.CUDNN_NEG_INF_PAD, "nhwc", "idx"),
    "max_zeropad_nchw_x": (MAX, (3, 3), (2, 2), (1, 1), PAD.CUDNN_ZERO_PAD, "nchw", "x"),
    "max_nhwc_x": (MAX, (3, 2), (2, 1), (1, 1), PAD.CUDNN_NEG_INF_PAD, "nhwc", "x"),
    "max_nchw_idx": (MAX, (2, 2), (2, 2), (0, 0), PAD.CUDNN_ZERO_PAD, "nchw", "idx"),
    "avg_incl_nhwc": (AIN, (3, 3), (2, 2), (1, 1), PAD.CUDNN_ZERO_PAD, "nhwc", "dy"),
    "avg_excl_nchw": (AEX, (3, 3), (1, 1), (1, 1), PAD.CUDNN_ZERO_PAD, "nchw", "dy"),
    "avg_excl_nhwc_edge": (AEX, (2, 3), (2, 2), (1, 1), PAD.CUDNN_EDGE_VAL_PAD, "nhwc", "dy"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pool_fwd_bwd_direct(rng, case):
    mode, w, s, p, pad, layout, bwd = CASES[case]
    g = pool_graph(mode, SHAPE2D, w, s, p, pad, layout, idx=bwd == "idx", bwd=bwd)
    plan = _execute(g, rng)
    names = _kernel_names(plan)   # the tiled kernels where the shape fits them (NCHW W % 4 == 0 at GPU sizes)
    assert names[0] in FAST_FWD and names[1] in FAST_BWD, names
    assert plan.workspace_size == 0


def test_maxpool_fwd_no_index_nhwc_vec(rng):
    g = pool_graph(MAX, SHAPE2D, (3, 3), (2, 2), (1, 1), PAD.CUDNN_NEG_INF_PAD, "nhwc", idx=False)
    plan = _execute(g, rng)
    step = plan.parts[0].steps[0]
    assert step.name == "resample_direct_fwd" and plan.workspace_size == 0
    n_out = math.prod(_out(SHAPE2D, (3, 3), (2, 2), (1, 1)))
    assert step.grid * step.block >= n_out // 4 > (step.grid - 1) * step.block   # 4 channels per thread


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("mode", [MAX, AEX])
def test_pool3d_fwd_bwd(rng, layout, mode):
    g = pool_graph(mode, SHAPE3D, (2, 3, 3), (2, 2, 2), (0, 1, 1), PAD.CUDNN_NEG_INF_PAD if mode == MAX else
                   PAD.CUDNN_ZERO_PAD, layout, idx=mode == MAX, bwd="idx" if mode == MAX else "dy")
    assert _kernel_names(_execute(g, rng)) == ["resample_direct_fwd", "resample_direct_bwd"]   # 3-D: direct


def test_edge_pad_max_backward_uses_generic_gather(rng):
    g = pool_graph(MAX, SHAPE2D, (3, 3), (2, 2), (1, 1), PAD.CUDNN_EDGE_VAL_PAD, "nhwc", idx=True, bwd="idx")
    assert _kernel_names(_execute(g, rng)) == ["resample_direct_fwd", "resample_bwd"]


def test_misaligned_address_refused():
    """The vector path's 16-byte promise is checked on the bound addresses."""
    from ncudnn.errors import CudnnError
    from numba import cuda
    g = pool_graph(AIN, (1, 4, 4, 4), (2, 2), (2, 2), (0, 0), PAD.CUDNN_ZERO_PAD, "nhwc", idx=False)
    plan = api.build_plan(g, api.get_heuristics(g)[0])
    big = cuda.to_device(np.zeros(64 + 1, np.float32))
    x = big[1:]
    y = cuda.to_device(np.zeros(16, np.float32))
    with pytest.raises(CudnnError, match="16-byte"):
        api.execute(plan, {1: x, 2: y}, workspace=None)


# ------------------------------------------------------------------------------------------------
# GPU timing (NCUDNN_SHAPES irrelevant: always the issue-4 shape)

def _time(fn, reps=20):
    from numba import cuda
    src, dst = cuda.device_array(32 << 20, np.float32), cuda.device_array(32 << 20, np.float32)
    fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        dst.copy_to_device(src)   # 2 x 128 MiB device-to-device: L2 (50 MB) flushed before every rep
        s, e = cuda.event(), cuda.event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("op", ["max", "avg", "max_bwd_idx", "max_bwd_x", "avg_bwd"])
def test_gpu_pool_issue4_timing(op, layout):
    from numba import cuda
    xd, w, s, p = (32, 256, 112, 112), (3, 3), (2, 2), (1, 1)
    yd = _out(xd, w, s, p)
    mode = MAX if op.startswith("max") else AIN
    pad = PAD.CUDNN_NEG_INF_PAD if mode == MAX else PAD.CUDNN_ZERO_PAD
    bwd = {"max_bwd_idx": "idx", "max_bwd_x": "x", "avg_bwd": "dy"}.get(op)
    g = pool_graph(mode, xd, w, s, p, pad, layout, idx=bwd == "idx", bwd=bwd)
    plan = api.build_plan(g, api.get_heuristics(g)[0])
    rng = np.random.default_rng(0)
    nx, ny = math.prod(xd), math.prod(yd)
    bufs = {1: cuda.to_device(rng.standard_normal(nx, np.float32)), 2: cuda.device_array(ny, np.float32)}
    if bwd == "idx":
        bufs[3] = cuda.device_array(ny, np.int32)
    if bwd:
        bufs[20] = cuda.to_device(rng.standard_normal(ny, np.float32))
        bufs[21] = cuda.device_array(nx, np.float32)
    ws = cuda.device_array(max(plan.workspace_size, 1), np.uint8)
    ms_all = _time(lambda: api.execute(plan, bufs, workspace=ws))
    ms_fwd = None
    if bwd:
        gf = pool_graph(mode, xd, w, s, p, pad, layout, idx=bwd == "idx")
        pf = api.build_plan(gf, api.get_heuristics(gf)[0])
        fb = {k: v for k, v in bufs.items() if k in (1, 2, 3)}
        ms_fwd = _time(lambda: api.execute(pf, fb, workspace=ws))
    ms = ms_all - ms_fwd if ms_fwd is not None else ms_all
    nbytes = 4 * (nx + ny) + (4 * ny if bwd == "idx" else 0) + (4 * nx if bwd == "x" else 0) \
        if bwd else 4 * (nx + ny)
    kind = _kernel_names(plan)
    line = (f"ncudnn {op} {layout}: {ms:.4f} ms ({nbytes / ms / 1e6:.0f} GB/s, {nbytes / ms / 4.21e7:.0f}% of copy; "
            f"fwd+bwd {ms_all:.4f} ms) [{','.join(kind)}]")
    try:
        import torch
        import torch.nn.functional as F
        fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
        xt = torch.randn(xd, device="cuda").contiguous(memory_format=fmt).requires_grad_(bwd is not None)
        pool = (lambda t: F.max_pool2d(t, 3, 2, 1)) if mode == MAX else (lambda t: F.avg_pool2d(t, 3, 2, 1))
        if bwd:
            yt = pool(xt)
            gy = torch.randn_like(yt)
            tms = _time(lambda: torch.autograd.grad(yt, xt, gy, retain_graph=True))
        else:
            with torch.no_grad():
                tms = _time(lambda: pool(xt))
        line += f" | torch {tms:.4f} ms -> ncudnn speed {tms / ms:.2f}x"
    except ImportError:
        line += " | torch not importable"
    print(line)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "rsmp_timing.txt"), "a") as f:
            f.write(line + "\n")
    assert kind[-1] in FAST_FWD + FAST_BWD, kind


@pytest.mark.parametrize("mode", [RM.CUDNN_RESAMPLE_NEAREST, RM.CUDNN_RESAMPLE_BILINEAR])
def test_upsample2x_nhwc_direct_forward(rng, mode):
    """2x upsampling (s = 1/2, w = 2, pre = post = 3/4, EDGE) on the NHWC vector path; backward generic."""
    xd = size((1, 4, 3, 5), (8, 64, 56, 56))
    yd = tuple(xd[:2]) + tuple(2 * v for v in xd[2:])
    geo = dict(mode=mode, spatial_dims=2, window=(2, 2), stride=(0.5, 0.5), pre_padding=(0.75, 0.75),
               post_padding=(0.75, 0.75), padding_mode=PAD.CUDNN_EDGE_VAL_PAD)
    x = U.t(1, xd, strides=chlast(xd), name="x")
    f = ResampleFwd("up", {"X": x}, {"Y": U.t(2, yd, strides=chlast(yd), name="y")}, **geo)
    b = ResampleBwd("up_bwd", {"DY": U.t(20, yd, strides=chlast(yd), name="dy")},
                    {"DX": U.t(21, xd, strides=chlast(xd), name="dx")}, **geo)
    plan = _execute(OpGraph([f, b]).finalize(), rng)
    assert _kernel_names(plan) == ["resample_direct_fwd", "resample_bwd"]
    step = plan.parts[0].steps[0]
    assert step.grid * step.block >= math.prod(yd) // 4 > (step.grid - 1) * step.block   # 4 channels per thread


@pytest.mark.parametrize("dtype", [DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16])
def test_maxpool_half_scalar_index_nhwc(rng, dtype):
    """Half-precision NHWC max pool (VEC 1) with an int32 index stored per element, backward routed by it."""
    xd, w, s, p = (1, 4, 5, 6), (3, 3), (2, 2), (1, 1)
    yd = _out(xd, w, s, p)
    geo = dict(mode=MAX, spatial_dims=2, window=w, stride=s, pre_padding=p, post_padding=p,
               padding_mode=PAD.CUDNN_NEG_INF_PAD)
    x = U.t(1, xd, dtype, chlast(xd), "x")
    idx = U.t(3, yd, I32, chlast(yd), "idx")
    f = ResampleFwd("pool", {"X": x}, {"Y": U.t(2, yd, dtype, chlast(yd), "y"), "IDX": idx}, **geo)
    b = ResampleBwd("pool_bwd", {"DY": U.t(20, yd, dtype, chlast(yd), "dy"), "IDX": idx},
                    {"DX": U.t(21, xd, dtype, chlast(xd), "dx")}, **geo)
    plan = _execute(OpGraph([f, b]).finalize(), rng, tol=U.TOLNAME[dtype])
    assert _kernel_names(plan) == ["resample_direct_fwd", "resample_direct_bwd"]
