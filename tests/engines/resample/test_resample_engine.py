"""Engine "resample" (pooling, nearest, bilinear; forward and backward) through the engine API against
the float64 oracle."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir import OpGraph, ResampleBwd, ResampleFwd, TensorDesc
from ncudnn.types import (cudnnDataType_t as DT, cudnnPaddingMode_t as PAD, cudnnResampleMode_t as RM,
                          cudnnStatus_t as S)

import membound_util as U
from test_norm_batch_engine import _execute

I32 = DT.CUDNN_DATA_INT32


def nhwc(dims):
    n, c, *sp = dims
    st, acc = {}, 1
    for d in [1] + list(range(len(dims) - 1, 1, -1)) + [0]:
        st[d] = acc
        acc *= dims[d]
    return tuple(st[d] for d in range(len(dims)))


def _out(x, w, s, pre, post):
    import math
    return tuple(x[:2]) + tuple(math.floor((n + a + b - k) / t) + 1 for n, k, t, a, b in zip(x[2:], w, s, pre, post))


def fwd_node(mode, xd, w, s, pre, post, pad=PAD.CUDNN_ZERO_PAD, layout="nchw", dtype=U.F32, idx=False, uid=1):
    xs = nhwc(xd) if layout == "nhwc" else None
    yd = _out(xd, w, s, pre, post)
    ys = nhwc(yd) if layout == "nhwc" else None
    outs = {"Y": U.t(uid + 1, yd, dtype, ys, "y")}
    if idx:
        outs["IDX"] = U.t(uid + 2, yd, I32, ys, "idx")
    return ResampleFwd("pool", {"X": U.t(uid, xd, dtype, xs, "x")}, outs, mode=mode, spatial_dims=len(w),
                       window=w, stride=s, pre_padding=pre, post_padding=post, padding_mode=pad)


CASES = {
    "maxpool_nhwc_idx": (RM.CUDNN_RESAMPLE_MAXPOOL, (2, 3, 5, 5), (3, 3), (2, 2), (1, 1), (1, 1), PAD.CUDNN_NEG_INF_PAD,
                         "nhwc", True),
    "avg_excl": (RM.CUDNN_RESAMPLE_AVGPOOL_EXCLUDE_PADDING, (1, 2, 4, 5), (3, 3), (1, 1), (1, 1), (1, 1),
                 PAD.CUDNN_ZERO_PAD, "nchw", False),
    "avg_incl_edge": (RM.CUDNN_RESAMPLE_AVGPOOL, (1, 2, 4, 4), (2, 2), (2, 2), (1, 1), (1, 1), PAD.CUDNN_EDGE_VAL_PAD,
                      "nhwc", False),
    "bilinear_up2": (RM.CUDNN_RESAMPLE_BILINEAR, (1, 2, 3, 3), (2, 2), (0.5, 0.5), (0.75, 0.75), (0.75, 0.75),
                     PAD.CUDNN_EDGE_VAL_PAD, "nchw", False),
    "nearest_up2": (RM.CUDNN_RESAMPLE_NEAREST, (1, 2, 3, 2), (2, 2), (0.5, 0.5), (0.75, 0.75), (0.75, 0.75),
                    PAD.CUDNN_EDGE_VAL_PAD, "nhwc", False),
    "maxpool3d": (RM.CUDNN_RESAMPLE_MAXPOOL, (1, 2, 4, 4, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0),
                  PAD.CUDNN_ZERO_PAD, "nchw", True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward(rng, case):
    mode, xd, w, s, pre, post, pad, layout, idx = CASES[case]
    g = OpGraph([fwd_node(mode, xd, w, s, pre, post, pad, layout, idx=idx)]).finalize()
    assert _execute(g, rng).engine_names == ["resample"]


def test_forward_bf16(rng):
    g = OpGraph([fwd_node(RM.CUDNN_RESAMPLE_AVGPOOL, (1, 3, 4, 4), (2, 2), (2, 2), (0, 0), (0, 0),
                          dtype=DT.CUDNN_DATA_BFLOAT16, layout="nhwc")]).finalize()
    _execute(g, rng, tol="bfloat16")


@pytest.mark.parametrize("case", ["maxpool_nhwc_idx", "avg_excl", "bilinear_up2"])
def test_backward_after_forward(rng, case):
    """Forward (writing IDX for max pool) then backward in one graph: two subgraphs on the composite."""
    mode, xd, w, s, pre, post, pad, layout, idx = CASES[case]
    f = fwd_node(mode, xd, w, s, pre, post, pad, layout, idx=idx)
    y = f.outputs["Y"]
    ins = {"DY": U.t(20, y.dims, strides=y.strides, name="dy")}
    if idx:
        ins["IDX"] = f.outputs["IDX"]
    b = ResampleBwd("pool_bwd", ins, {"DX": U.t(21, xd, strides=f.inputs["X"].strides, name="dx")}, mode=mode,
                    spatial_dims=len(w), window=w, stride=s, pre_padding=pre, post_padding=post, padding_mode=pad)
    g = OpGraph([f, b]).finalize()
    plan = _execute(g, rng)
    assert plan.engine_names == ["resample", "resample"]


@pytest.mark.parametrize("pad", [PAD.CUDNN_ZERO_PAD, PAD.CUDNN_EDGE_VAL_PAD])
def test_maxpool_backward_without_index_or_x_refused(pad):
    """Neither IDX nor X (or X with EDGE padding, whose winners the gather cannot route): refused by name."""
    xd = (1, 2, 4, 4)
    ins = {"DY": U.t(1, (1, 2, 2, 2)), "Y": U.t(3, (1, 2, 2, 2))}
    if pad == PAD.CUDNN_EDGE_VAL_PAD:
        ins["X"] = U.t(2, xd)
    b = ResampleBwd("mp_bwd", ins, {"DX": U.t(4, xd)}, mode=RM.CUDNN_RESAMPLE_MAXPOOL, spatial_dims=2, window=(2, 2),
                    stride=(2, 2), pre_padding=(0, 0), post_padding=(0, 0), padding_mode=pad)
    g = OpGraph([b]).finalize()
    st, why = registry.by_name("resample").check_support(api.problem(g), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "IDX" in why and "'mp_bwd'" in why
    assert ("EDGE" in why) if pad == PAD.CUDNN_EDGE_VAL_PAD else ("X" in why)


def test_maxpool_without_index_output(rng):
    g = OpGraph([fwd_node(RM.CUDNN_RESAMPLE_MAXPOOL, (2, 3, 4, 4), (2, 2), (2, 2), (0, 0), (0, 0), layout="nhwc")]) \
        .finalize()
    plan = _execute(g, rng)
    assert plan.engine_names == ["resample"] and plan.workspace_size == 0   # no index: nothing stored
