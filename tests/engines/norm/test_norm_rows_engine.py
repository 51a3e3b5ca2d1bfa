"""Engine "norm_rows" (layer / RMS norm forward and backward) through the engine API against the
float64 oracle."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir import NormBwd, NormFwd, OpGraph, Pointwise, TensorDesc
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH,
                          cudnnBackendNormMode_t as NM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM,
                          cudnnStatus_t as S)

import membound_util as U
from test_norm_batch_engine import _execute

XD = (3, 4, 2, 3)
NHWC = (24, 1, 12, 4)


def fwd_graph(mode, strides=None, dtype=U.F32, training=True, relu=False, bias=True, dims=XD):
    x = U.t(1, dims, dtype, strides, "x")
    sc = (1,) + tuple(dims[1:])
    sst = strides[1:] if strides else None
    ins = {"X": x, "SCALE": U.t(2, sc, strides=(0,) + tuple(sst) if sst else None, name="scale"),
           "EPSILON": U.scalar(4, 1e-5)}
    if bias:
        ins["BIAS"] = U.t(3, sc, strides=(0,) + tuple(sst) if sst else None, name="bias")
    st = (dims[0],) + (1,) * (len(dims) - 1)
    outs = {"Y": TensorDesc(10, is_virtual=True) if relu else U.t(10, dims, dtype, strides, "y")}
    if training:
        outs["INV_VARIANCE"] = U.t(12, st, name="inv")
        if mode == NM.CUDNN_LAYER_NORM:
            outs["MEAN"] = U.t(11, st, name="mean")
    nodes = [NormFwd("ln", ins, outs, mode=mode, phase=PH.CUDNN_NORM_FWD_TRAINING if training
                     else PH.CUDNN_NORM_FWD_INFERENCE)]
    if relu:
        nodes.append(Pointwise("relu", {"X": nodes[0].outputs["Y"]}, {"Y": U.t(20, dims, dtype, strides, "out")},
                               mode=PM.CUDNN_POINTWISE_RELU_FWD))
    return OpGraph(nodes).finalize()


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_forward_training(rng, mode, layout):
    g = fwd_graph(mode, NHWC if layout == "nhwc" else None, bias=mode == NM.CUDNN_LAYER_NORM)
    assert _execute(g, rng, positive=("X",)).engine_names == ["norm_rows"]  # row means away from 0


@pytest.mark.parametrize("dtype", [DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16])
def test_forward_half_inference_with_epilogue(rng, dtype):
    plan = _execute(fwd_graph(NM.CUDNN_LAYER_NORM, dtype=dtype, training=False, relu=True), rng,
                    tol=U.TOLNAME[dtype])
    assert plan.engine_names == ["norm_rows"] and len(plan.parts[0].steps) == 2


def test_long_rows_looped_path(rng):
    """BLOCK_SIZE 32 on rows of 600: more than 16 values per thread, the looped kernel."""
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(2, 600))
    ecs = [e for e in api.get_heuristics(g) if e.config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE) == 32]
    assert ecs
    # X in [0.5, 2): the row means stay away from 0, where a relative-norm check of MEAN is ill-conditioned
    _execute(g, rng, positive=("X",), ec=ecs[0])


@pytest.mark.parametrize("mode,layout", [(NM.CUDNN_LAYER_NORM, "nchw"), (NM.CUDNN_RMS_NORM, "nhwc")])
def test_backward(rng, mode, layout):
    xs = NHWC if layout == "nhwc" else None
    sc = (1,) + XD[1:]
    sst = (0,) + NHWC[1:] if xs else None
    st = (XD[0], 1, 1, 1)
    ins = {"X": U.t(1, XD, strides=xs, name="x"), "DY": U.t(2, XD, strides=xs, name="dy"),
           "SCALE": U.t(3, sc, strides=sst, name="scale"), "INV_VARIANCE": U.t(5, st, name="inv")}
    if mode == NM.CUDNN_LAYER_NORM:
        ins["MEAN"] = U.t(4, st, name="mean")
    outs = {"DX": U.t(10, XD, strides=xs, name="dx"), "DSCALE": U.t(11, sc, strides=sst, name="dscale"),
            "DBIAS": U.t(12, sc, strides=sst, name="dbias")}
    g = OpGraph([NormBwd("bwd", ins, outs, mode=mode)]).finalize()
    assert _execute(g, rng, positive=("INV_VARIANCE",)).engine_names == ["norm_rows"]


def test_non_dense_rows_take_the_strided_config(rng):
    """Padded rows: the dense row kernels refuse them in keep() with a reason; the strided config (KERNEL_CFG 30)
    is the engine's only one (issue #24)."""
    x = U.t(1, (2, 3, 4), strides=(16, 4, 1), name="x")  # padded rows
    ins = {"X": x, "SCALE": U.t(2, (1, 3, 4)), "BIAS": U.t(3, (1, 3, 4)), "EPSILON": U.scalar(4, 1e-5)}
    g = OpGraph([NormFwd("ln", ins, {"Y": U.t(10, (2, 3, 4), strides=(16, 4, 1))}, mode=NM.CUDNN_LAYER_NORM,
                         phase=PH.CUDNN_NORM_FWD_INFERENCE)]).finalize()
    eng, sub, ctx = registry.by_name("norm_rows"), api.problem(g), api.context()
    assert eng.check_support(sub, ctx)[0] == S.CUDNN_STATUS_SUCCESS
    st, why = eng.keep(sub, eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0), ctx)
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "'ln'" in why and "X" in why and "KERNEL_CFG 30" in why
    assert [c.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG) for c in eng.candidates(sub, ctx)] == [30]
    assert _execute(g, rng, positive=("X",)).engine_names == ["norm_rows"]
    st, why = registry.by_name("norm_batch").check_support(api.problem(g), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "LAYER_NORM" in why

