"""Batch norm through the engine API on the dedicated NHWC ("cols") and NCHW ("planes") kernels and on
the generic path for other layouts, forward (training) and backward, against the float64 oracle."""
import numpy as np
import pytest

from ncudnn.engines.norm.bn_steps import bn_layout
from ncudnn.ir import NormBwd, NormFwd, OpGraph
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM

import membound_util as U
from test_norm_batch_engine import _execute

N, C, H, W = 2, 5, 3, 4
LAYOUTS = {"nchw": None, "nhwc": (H * W * C, 1, W * C, C),
           "padded": (C * H * (W + 1), H * (W + 1), W + 1, 1)}   # rows padded: generic path
EXPECT = {"nchw": "norm_bn_planes_partial", "nhwc": "norm_bn_cols_partial", "padded": "norm_batch_stats"}


def _x(uid, strides, name, dtype=U.F32):
    return U.t(uid, (N, C, H, W), dtype, strides, name)


def test_bn_layout_classifies():
    assert bn_layout(_x(1, LAYOUTS["nhwc"], "x")) == ("cols", N * H * W, C)
    assert bn_layout(_x(1, None, "x")) == ("planes", N, C, H * W, C * H * W)
    assert bn_layout(_x(1, LAYOUTS["padded"], "x")) is None


@pytest.mark.parametrize("layout", ["nchw", "nhwc", "padded"])
def test_bn_forward_training_layouts(rng, layout):
    xs = LAYOUTS[layout]
    ch = {p: U.t(k + 2, (1, C, 1, 1), name=p) for k, p in enumerate(("SCALE", "BIAS", "INPUT_RUNNING_MEAN",
                                                                     "INPUT_RUNNING_VAR"))}
    ins = dict(X=_x(1, xs, "x"), EPSILON=U.scalar(8, 1e-3), EXP_AVG_FACTOR=U.scalar(9, 0.3), **ch)
    outs = {"Y": _x(10, xs, "y"), "MEAN": U.t(11, (1, C, 1, 1), name="mean"),
            "INV_VARIANCE": U.t(12, (1, C, 1, 1), name="inv"),
            "OUTPUT_RUNNING_MEAN": U.t(13, (1, C, 1, 1), name="rm"), "OUTPUT_RUNNING_VAR": U.t(14, (1, C, 1, 1), name="rv")}
    g = OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR",))
    names = [s.name for s in plan.parts[0].steps]
    assert names[0] == EXPECT[layout]
    if layout != "padded":
        assert names[-1] == EXPECT[layout].replace("partial", "apply")


@pytest.mark.parametrize("layout,dtype", [("nchw", U.F32), ("nhwc", U.DT.CUDNN_DATA_BFLOAT16), ("padded", U.F32)])
def test_bn_backward_layouts(rng, layout, dtype):
    xs = LAYOUTS[layout]
    ins = {"X": _x(1, xs, "x", dtype), "DY": _x(2, xs, "dy", dtype), "SCALE": U.t(3, (1, C, 1, 1), name="scale"),
           "MEAN": U.t(4, (1, C, 1, 1), name="mean"), "INV_VARIANCE": U.t(5, (1, C, 1, 1), name="inv")}
    outs = {"DX": _x(10, xs, "dx", dtype), "DSCALE": U.t(11, (1, C, 1, 1), name="dscale"),
            "DBIAS": U.t(12, (1, C, 1, 1), name="dbias")}
    g = OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_BATCH_NORM)]).finalize()
    plan = _execute(g, rng, positive=("INV_VARIANCE",), tol=U.TOLNAME[dtype])
    names = [s.name for s in plan.parts[0].steps]
    assert names[0] == EXPECT[layout].replace("norm_batch_stats", "norm_batch_bwd_sums")
    if layout != "padded":
        assert names[-1] == EXPECT[layout].replace("partial", "apply")


def test_bn_forward_large_mean_shifted(rng):
    """|mean| >> std: the shifted sums keep the variance accurate on the dedicated path."""
    xs = LAYOUTS["nhwc"]
    x = _x(1, xs, "x")
    ins = {"X": x, "SCALE": U.t(2, (1, C, 1, 1)), "BIAS": U.t(3, (1, C, 1, 1)), "EPSILON": U.scalar(4, 1e-5)}
    outs = {"Y": _x(10, xs, "y"), "MEAN": U.t(11, (1, C, 1, 1)), "INV_VARIANCE": U.t(12, (1, C, 1, 1))}
    g = OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    from ncudnn.reference.ops import run_node
    from ncudnn.testing import assert_close
    xv = rng.uniform(-1, 1, (N, C, H, W)) + 1000.0
    s, b = rng.uniform(0.5, 1, (1, C, 1, 1)), rng.uniform(-1, 1, (1, C, 1, 1))
    pack = {1: U.upload(xv, x), 2: U.upload(s, ins["SCALE"]), 3: U.upload(b, ins["BIAS"])}
    for p, t in outs.items():
        pack[t.uid] = U.poisoned(t)
    U.run(g, pack)
    ref = run_node(g.nodes[0], {"X": U.cast(xv, x.dtype), "SCALE": s, "BIAS": b, "EPSILON": np.float64(1e-5)})
    assert_close(U.download(pack[12], outs["INV_VARIANCE"]), ref["INV_VARIANCE"], "float32", name="inv")
    assert_close(U.download(pack[10], outs["Y"]), ref["Y"], "float32", name="y")
