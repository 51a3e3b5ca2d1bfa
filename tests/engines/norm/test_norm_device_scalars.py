"""EPSILON and EXP_AVG_FACTOR given as one-element device tensors (not by value): the norm engines
read them inside their kernels; results against the float64 oracle."""
import pytest

from ncudnn.ir import NormFwd, OpGraph
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM

import membound_util as U
from test_norm_batch_engine import _execute

N, C, H, W = 2, 3, 2, 4
ONE = (1, 1, 1, 1)


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM])
def test_row_norm_device_epsilon(rng, mode):
    dims = (N, C, H, W)
    ins = {"X": U.t(1, dims, name="x"), "SCALE": U.t(2, (1, C, H, W), name="scale"),
           "BIAS": U.t(3, (1, C, H, W), name="bias"), "EPSILON": U.t(4, ONE, name="eps")}
    outs = {"Y": U.t(10, dims, name="y"), "INV_VARIANCE": U.t(12, (N, 1, 1, 1), name="inv")}
    if mode == NM.CUDNN_LAYER_NORM:
        outs["MEAN"] = U.t(11, (N, 1, 1, 1), name="mean")
    g = OpGraph([NormFwd("ln", ins, outs, mode=mode, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    # eps drawn in [0.5, 2): large enough that a by-value default would be visibly wrong
    assert _execute(g, rng, positive=("EPSILON",)).engine_names == ["norm_rows"]


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_batch_norm_device_epsilon_and_momentum(rng, layout):
    xs = (H * W * C, 1, W * C, C) if layout == "nhwc" else None
    ch = {p: U.t(k + 2, (1, C, 1, 1), name=p) for k, p in enumerate(("SCALE", "BIAS", "INPUT_RUNNING_MEAN",
                                                                     "INPUT_RUNNING_VAR"))}
    ins = dict(X=U.t(1, (N, C, H, W), strides=xs, name="x"), EPSILON=U.t(8, ONE, name="eps"),
               EXP_AVG_FACTOR=U.t(9, ONE, name="mom"), **ch)
    outs = {"Y": U.t(10, (N, C, H, W), strides=xs, name="y"), "MEAN": U.t(11, (1, C, 1, 1), name="mean"),
            "INV_VARIANCE": U.t(12, (1, C, 1, 1), name="inv"),
            "OUTPUT_RUNNING_MEAN": U.t(13, (1, C, 1, 1), name="rm"), "OUTPUT_RUNNING_VAR": U.t(14, (1, C, 1, 1), name="rv")}
    g = OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR", "EPSILON", "EXP_AVG_FACTOR"))
    assert plan.engine_names == ["norm_batch"]
