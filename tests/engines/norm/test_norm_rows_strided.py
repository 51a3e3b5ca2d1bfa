"""Engine "norm_rows", the strided kernels (forward KERNEL_CFG 30, backward KERNEL_CFG 2; issue #24: every valid
layer / RMS norm graph gets a plan): permuted and padded X, Y / DY / DX in layouts of their own, SCALE / BIAS /
DSCALE / DBIAS not following X, strided statistics; built through pygraph as cudnn-frontend users write it, run on
numba device arrays against the float64 oracle with poisoned outputs and the elements outside each output view
checked unchanged."""
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn.ir import packed_strides
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT

import membound_util as U

KC = K.CUDNN_KNOB_TYPE_KERNEL_CFG
FE_DT = {DT.CUDNN_DATA_FLOAT: cudnn.data_type.FLOAT, DT.CUDNN_DATA_HALF: cudnn.data_type.HALF,
         DT.CUDNN_DATA_BFLOAT16: cudnn.data_type.BFLOAT16}
F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
XD = (3, 4, 2, 3)
PD = (1,) + XD[1:]
SD = (XD[0], 1, 1, 1)
TRAIN, INFER = cudnn.norm_forward_phase.TRAINING, cudnn.norm_forward_phase.INFERENCE


def order(dims, perm, pad=0):
    """Packed strides for ``dims`` in the dim order ``perm`` (outermost first), the outermost stride padded by
    ``pad`` elements."""
    st = list(packed_strides(dims, perm))
    st[perm[0]] += pad
    return st


ROW = order(XD, (0, 1, 2, 3))
PERM = order(XD, (2, 0, 3, 1))            # a permutation: the batch not outermost
NHWC_PAD = order(XD, (0, 2, 3, 1), pad=5)  # channels last, padded batch stride
PAD = [30, 6, 3, 1]                        # row-major, padded batch stride
P_ROW = packed_strides(PD)                 # parameters row-major
P_ODD = [99, 4, 17, 1]                     # parameters in a layout of their own, with gaps
S_PAD = [2, 1, 1, 1]                       # statistics every other element


def graph(dtype):
    return cudnn.pygraph(io_data_type=FE_DT[dtype], intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def t(g, name, dims, strides, dtype=None):
    kw = {} if dtype is None else dict(data_type=FE_DT[dtype])
    return g.tensor(name=name, dim=list(dims), stride=list(strides), **kw)


def execute(g, tol, positive=(), kcfg=None):
    """Build the heuristics' first plan of ``g``, run it on random inputs with poisoned outputs, compare every
    output with the oracle and check the gaps of every output buffer unchanged; returns the plan's config."""
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    vals, pack, outs = U.random_pack(g.ir, np.random.default_rng(24), positive)
    ws = g.get_workspace_size()
    from numba import cuda
    g.execute(pack, cuda.to_device(np.full(max(ws, 1), 0xA5, np.uint8)) if ws else None)
    descs = U.oracle(g.ir, vals)
    for uid, buf in outs.items():
        d = descs[uid]
        assert_close(U.download(buf, d), vals[uid], tol if d.dtype != F32 else "float32", name=d.name)
        _gaps_unchanged(buf, d)
    cfg = g._candidates[0].config
    assert cfg.engine == "norm_rows" and (kcfg is None or cfg.get(KC) == kcfg), cfg
    return cfg


def _gaps_unchanged(buf, d):
    dt = np.dtype(U.NP[d.dtype])
    host = buf.copy_to_host()
    covered = np.zeros(host.size, bool)
    idx = sum(np.arange(n).reshape([-1 if i == k else 1 for i in range(len(d.dims))]) * s
              for k, (n, s) in enumerate(zip(d.dims, d.strides)))
    covered[np.asarray(idx).reshape(-1)] = True
    uint = np.dtype(f"uint{8 * dt.itemsize}")
    bits = np.full(1, poison_value(dt), dt).view(uint)[0]      # NaN poison: compared as bits
    assert (host.view(uint)[~covered] == bits).all(), f"{d.name}: elements outside the view were written"


def forward(dtype, rms, phase, xs, ys, ss, bs=None, ms=S_PAD, vs=S_PAD, dims=XD, relu=False):
    g = graph(dtype)
    pd, sd = (1,) + tuple(dims[1:]), (dims[0],) + (1,) * (len(dims) - 1)
    x = t(g, "X", dims, xs)
    kw = dict(input=x, scale=t(g, "scale", pd, ss, F32), epsilon=1e-5, norm_forward_phase=phase, name="norm")
    if bs is not None:
        kw["bias"] = t(g, "bias", pd, bs, F32)
    out = (g.rmsnorm if rms else g.layernorm)(**kw)
    y, stats = out[0], [s for s in out[1:] if s is not None]
    if relu:
        y = g.relu(input=y, name="relu")
    y.set_output(True).set_dim(list(dims)).set_stride(list(ys))
    for s, st in zip(stats, ([vs] if rms else [ms, vs])):
        s.set_output(True).set_dim(list(sd)).set_stride(list(st)).set_data_type(cudnn.data_type.FLOAT)
    return g


@pytest.mark.parametrize("dtype,rms,phase,xs,ys,ss,bs", [
    (F32, False, TRAIN, PERM, ROW, P_ROW, P_ODD),      # permuted X, Y row-major, parameters not following X
    (F16, True, TRAIN, NHWC_PAD, PERM, P_ODD, None),   # padded channels-last X, Y permuted
    (BF16, False, INFER, PAD, NHWC_PAD, P_ODD, P_ROW),  # padded X, Y padded channels-last
    (F32, True, INFER, ROW, PAD, P_ROW, P_ODD),        # dense X, only Y padded
])
def test_forward_strided(dtype, rms, phase, xs, ys, ss, bs):
    g = forward(dtype, rms, phase, xs, ys, ss, bs)
    execute(g, U.TOLNAME[dtype], positive=("X",), kcfg=30)


def test_forward_strided_epilogue():
    """A permuted X with a fused relu written in another layout: y in the workspace at X's strides."""
    g = forward(F32, False, INFER, PERM, NHWC_PAD, P_ODD, P_ROW, relu=True)
    execute(g, "float32", positive=("X",), kcfg=30)


def test_forward_strided_block_per_row():
    """Rows longer than a warp's (1100 elements): a block per row, padded batch stride, Y and statistics padded."""
    g = forward(F32, False, TRAIN, [1104, 1], [1101, 1], [1100, 1], [1100, 1], ms=[3, 1], vs=[2, 1], dims=(2, 1100))
    execute(g, "float32", positive=("X",), kcfg=30)


def backward(dtype, rms, xs, dys, dxs, ss, dss, dbs=None, ms=S_PAD, vs=S_PAD, dims=XD):
    g = graph(dtype)
    pd, sd = (1,) + tuple(dims[1:]), (dims[0],) + (1,) * (len(dims) - 1)
    x, dy = t(g, "X", dims, xs), t(g, "DY", dims, dys)
    sc, inv = t(g, "scale", pd, ss, F32), t(g, "inv", sd, vs, F32)
    if rms:
        dx, ds, db = g.rmsnorm_backward(grad=dy, input=x, scale=sc, inv_variance=inv, has_dbias=dbs is not None,
                                        name="norm_bwd")
    else:
        dx, ds, db = g.layernorm_backward(grad=dy, input=x, scale=sc, mean=t(g, "mean", sd, ms, F32),
                                          inv_variance=inv, name="norm_bwd")
    dx.set_output(True).set_dim(list(dims)).set_stride(list(dxs))
    ds.set_output(True).set_dim(list(pd)).set_stride(list(dss)).set_data_type(cudnn.data_type.FLOAT)
    if db is not None:
        db.set_output(True).set_dim(list(pd)).set_stride(list(dbs)).set_data_type(cudnn.data_type.FLOAT)
    return g


@pytest.mark.parametrize("dtype,rms,xs,dys,dxs,ss,dss,dbs", [
    (F32, False, PERM, NHWC_PAD, PAD, P_ODD, P_ROW, P_ODD),  # every tensor in a layout of its own
    (BF16, True, PAD, PERM, PERM, P_ROW, P_ODD, None),       # RMS without dbias, padded X
    (F16, False, ROW, ROW, NHWC_PAD, P_ROW, P_ROW, P_ROW),    # dense, only DX in another layout
    (F32, True, NHWC_PAD, NHWC_PAD, NHWC_PAD, P_ODD, P_ODD, P_ROW),  # RMS with dbias, padded channels last
])
def test_backward_strided(dtype, rms, xs, dys, dxs, ss, dss, dbs):
    g = backward(dtype, rms, xs, dys, dxs, ss, dss, dbs)
    execute(g, U.TOLNAME[dtype], positive=("inv",), kcfg=2)


def test_backward_strided_block_per_row():
    g = backward(F32, False, [1103, 1], [1100, 1], [1105, 1], [1100, 1], [1100, 1], [1100, 1], ms=[2, 1], vs=[3, 1],
                 dims=(3, 1100))
    execute(g, "float32", positive=("inv",), kcfg=2)
