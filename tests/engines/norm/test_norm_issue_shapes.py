"""The issue's normalization cases end to end through the engine API: tiny in the simulator, the real
shapes with NCUDNN_SHAPES=gpu (batch norm N32 C256 56x56 NHWC / NCHW forward and backward; layer /
RMS norm 8192x4096 and 8192x1024 forward, layer norm backward), each checked against float64."""
import pytest

from ncudnn.ir import NormBwd, NormFwd, OpGraph
from ncudnn.testing import size
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM

import membound_util as U
from test_norm_batch_engine import _execute

BN = size((2, 8, 3, 5), (32, 256, 56, 56))
ROWS = {"long": size((2, 1100), (8192, 4096)), "short": size((3, 300), (8192, 1024))}


def _bn_strides(layout):
    n, c, h, w = BN
    return (h * w * c, 1, w * c, c) if layout == "nhwc" else None


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_nrm_batchnorm_forward_training(rng, layout):
    xs, C = _bn_strides(layout), BN[1]
    ch = {p: U.t(k + 2, (1, C, 1, 1), name=p) for k, p in enumerate(("SCALE", "BIAS", "INPUT_RUNNING_MEAN",
                                                                     "INPUT_RUNNING_VAR"))}
    ins = dict(X=U.t(1, BN, strides=xs, name="x"), EPSILON=U.scalar(8, 1e-5), EXP_AVG_FACTOR=U.scalar(9, 0.1), **ch)
    outs = {"Y": U.t(10, BN, strides=xs, name="y"), "MEAN": U.t(11, (1, C, 1, 1), name="mean"),
            "INV_VARIANCE": U.t(12, (1, C, 1, 1), name="inv"),
            "OUTPUT_RUNNING_MEAN": U.t(13, (1, C, 1, 1), name="rm"), "OUTPUT_RUNNING_VAR": U.t(14, (1, C, 1, 1), name="rv")}
    g = OpGraph([NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    # X drawn from [0.5, 2): a per-channel mean of symmetric data over 100 352 values is ~1e-3, and its
    # relative error then measures cancellation, not the kernel (absolute error ~1e-7 either way)
    plan = _execute(g, rng, positive=("INPUT_RUNNING_VAR", "X"))
    assert [s.name for s in plan.parts[0].steps][0].startswith("norm_bn_")


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_nrm_batchnorm_backward(rng, layout):
    xs, C = _bn_strides(layout), BN[1]
    ins = {"X": U.t(1, BN, strides=xs, name="x"), "DY": U.t(2, BN, strides=xs, name="dy"),
           "SCALE": U.t(3, (1, C, 1, 1), name="scale"), "MEAN": U.t(4, (1, C, 1, 1), name="mean"),
           "INV_VARIANCE": U.t(5, (1, C, 1, 1), name="inv")}
    outs = {"DX": U.t(10, BN, strides=xs, name="dx"), "DSCALE": U.t(11, (1, C, 1, 1), name="dscale"),
            "DBIAS": U.t(12, (1, C, 1, 1), name="dbias")}
    g = OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_BATCH_NORM)]).finalize()
    plan = _execute(g, rng, positive=("INV_VARIANCE",))
    assert [s.name for s in plan.parts[0].steps][0].startswith("norm_bn_")


def _row_dims(which):
    r, n = ROWS[which]
    return (r, n, 1, 1)


@pytest.mark.parametrize("which", ["long", "short"])
@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM])
def test_nrm_rownorm_forward_training(rng, which, mode):
    dims = _row_dims(which)
    ins = {"X": U.t(1, dims, name="x"), "SCALE": U.t(2, (1,) + dims[1:], name="scale"), "EPSILON": U.scalar(4, 1e-5)}
    if mode == NM.CUDNN_LAYER_NORM:
        ins["BIAS"] = U.t(3, (1,) + dims[1:], name="bias")
    outs = {"Y": U.t(10, dims, name="y"), "INV_VARIANCE": U.t(12, (dims[0], 1, 1, 1), name="inv")}
    if mode == NM.CUDNN_LAYER_NORM:
        outs["MEAN"] = U.t(11, (dims[0], 1, 1, 1), name="mean")
    g = OpGraph([NormFwd("ln", ins, outs, mode=mode, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    assert _execute(g, rng, positive=("X",)).engine_names == ["norm_rows"]  # row means away from 0


@pytest.mark.parametrize("which", ["long", "short"])
def test_nrm_layernorm_backward(rng, which):
    dims = _row_dims(which)
    st = (dims[0], 1, 1, 1)
    ins = {"X": U.t(1, dims, name="x"), "DY": U.t(2, dims, name="dy"), "SCALE": U.t(3, (1,) + dims[1:], name="scale"),
           "MEAN": U.t(4, st, name="mean"), "INV_VARIANCE": U.t(5, st, name="inv")}
    outs = {"DX": U.t(10, dims, name="dx"), "DSCALE": U.t(11, (1,) + dims[1:], name="dscale"),
            "DBIAS": U.t(12, (1,) + dims[1:], name="dbias")}
    g = OpGraph([NormBwd("lnb", ins, outs, mode=NM.CUDNN_LAYER_NORM)]).finalize()
    assert _execute(g, rng, positive=("INV_VARIANCE",)).engine_names == ["norm_rows"]
