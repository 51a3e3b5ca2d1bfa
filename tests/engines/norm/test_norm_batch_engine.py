"""Engine "norm_batch" (batch / instance norm forward and backward, + pointwise epilogue) through the
engine API against the float64 oracle (reference.ops.run_node in IR port names)."""
import numpy as np
import pytest

from ncudnn.errors import CudnnError
from ncudnn.ir import NormBwd, NormFwd, OpGraph, Pointwise, TensorDesc
from ncudnn.reference.ops import run_node
from ncudnn.testing import assert_close
from ncudnn.types import (cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT,
                          cudnnPointwiseMode_t as PM, cudnnStatus_t as S)

import membound_util as U

N, C, H, W = 3, 4, 3, 2
NCHW = None
NHWC = (H * W * C, 1, W * C, C)


def _execute(g, rng, positive=(), tol="float32", ec=None):
    """Fill inputs, poison outputs, run, compare every written tensor of every node with the oracle."""
    vals, pack, outs = {}, {}, {}
    produced = {t.uid for n in g.nodes for t in n.outputs.values()}
    for n in g.nodes:
        for p, t in n.inputs.items():
            if t.uid in vals or t.uid in produced:
                continue
            if t.is_by_value:
                vals[t.uid] = np.float64(t.value)
                continue
            lo, hi = (0.5, 2.0) if p in positive else (-1.0, 1.0)
            a = rng.uniform(lo, hi, t.dims)
            vals[t.uid] = U.cast(a, t.dtype)
            pack[t.uid] = U.upload(a, t)
        for t in n.outputs.values():
            if not t.is_virtual:
                outs[t.uid] = pack[t.uid] = U.poisoned(t)
    plan = U.run(g, pack) if ec is None else U.run_ec(g, pack, ec)
    descs = {}
    for n in g.nodes:
        ref = run_node(n, {p: vals[t.uid] for p, t in n.inputs.items()})
        for p, t in n.outputs.items():
            vals[t.uid] = ref[p]
            descs[t.uid] = t
    for uid, buf in outs.items():
        assert_close(U.download(buf, descs[uid]), vals[uid], tol, name=descs[uid].name)
    return plan


def bn_training(strides=NCHW, dtype=U.F32, running=True, relu=False):
    xs = strides or None
    x = U.t(1, (N, C, H, W), dtype, xs, "x")
    ch = dict(dtype=U.F32)
    ins = {"X": x, "SCALE": U.t(2, (1, C, 1, 1), name="scale", **ch), "BIAS": U.t(3, (1, C, 1, 1), name="bias", **ch),
           "EPSILON": U.scalar(4, 1e-4, "eps")}
    outs = {"Y": TensorDesc(10, is_virtual=True, name="yv") if relu else U.t(10, (N, C, H, W), dtype, xs, "y"),
            "MEAN": U.t(11, (1, C, 1, 1), name="mean"), "INV_VARIANCE": U.t(12, (1, C, 1, 1), name="inv")}
    if running:
        ins.update(INPUT_RUNNING_MEAN=U.t(5, (1, C, 1, 1), name="rm"), INPUT_RUNNING_VAR=U.t(6, (1, C, 1, 1), name="rv"),
                   EXP_AVG_FACTOR=U.scalar(7, 0.2, "mom"))
        outs.update(OUTPUT_RUNNING_MEAN=U.t(13, (1, C, 1, 1), name="rm_out"),
                    OUTPUT_RUNNING_VAR=U.t(14, (1, C, 1, 1), name="rv_out"))
    nodes = [NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]
    if relu:
        nodes.append(Pointwise("relu", {"X": nodes[0].outputs["Y"]}, {"Y": U.t(20, (N, C, H, W), dtype, xs, "out")},
                               mode=PM.CUDNN_POINTWISE_RELU_FWD))
    return OpGraph(nodes).finalize()


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_bn_training_running_stats(rng, layout):
    plan = _execute(bn_training(NCHW if layout == "nchw" else NHWC), rng, positive=("X", "INPUT_RUNNING_VAR"))
    assert plan.engine_names == ["norm_batch"]


@pytest.mark.parametrize("dtype", [DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16])
def test_bn_training_half_with_relu_epilogue(rng, dtype):
    plan = _execute(bn_training(NHWC, dtype, running=False, relu=True), rng, tol=U.TOLNAME[dtype])
    steps = [s.name for s in plan.parts[0].steps]
    assert plan.engine_names == ["norm_batch"] and steps[0] == "norm_bn_cols_partial" and len(steps) == 4


def test_bn_inference_is_one_pass_with_epilogue(rng):
    x = U.t(1, (N, C, H, W), strides=NHWC, name="x")
    ch = {p: U.t(k + 2, (1, C, 1, 1), name=p) for k, p in enumerate(("SCALE", "BIAS", "MEAN_IN", "INV_VARIANCE_IN"))}
    bn = NormFwd("bn", dict(X=x, EPSILON=U.scalar(9, 1e-5), **ch), {"Y": TensorDesc(10, is_virtual=True)},
                 mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_INFERENCE)
    add = Pointwise("add", {"X": bn.outputs["Y"], "B": U.t(11, (N, C, H, W), strides=NHWC, name="res")},
                    {"Y": U.t(12, (N, C, H, W), strides=NHWC, name="out")}, mode=PM.CUDNN_POINTWISE_ADD)
    plan = _execute(OpGraph([bn, add]).finalize(), rng, positive=("INV_VARIANCE_IN",))
    assert plan.engine_names == ["norm_batch"] and len(plan.parts[0].steps) == 1 and plan.workspace_size == 0


def test_instance_norm_forward(rng):
    x = U.t(1, (N, C, H, W), strides=NHWC, name="x")
    ins = {"X": x, "SCALE": U.t(2, (1, C, 1, 1), name="s"), "BIAS": U.t(3, (1, C, 1, 1), name="b"),
           "EPSILON": U.scalar(4, 1e-5)}
    outs = {"Y": U.t(10, (N, C, H, W), strides=NHWC, name="y"), "MEAN": U.t(11, (N, C, 1, 1), name="mean"),
            "INV_VARIANCE": U.t(12, (N, C, 1, 1), name="inv")}
    g = OpGraph([NormFwd("in", ins, outs, mode=NM.CUDNN_INSTANCE_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize()
    assert _execute(g, rng, positive=("X",)).engine_names == ["norm_batch"]  # means away from 0


@pytest.mark.parametrize("mode,layout", [(NM.CUDNN_BATCH_NORM, "nhwc"), (NM.CUDNN_INSTANCE_NORM, "nchw")])
def test_backward(rng, mode, layout):
    xs = NHWC if layout == "nhwc" else None
    st = (1, C, 1, 1) if mode == NM.CUDNN_BATCH_NORM else (N, C, 1, 1)
    ins = {"X": U.t(1, (N, C, H, W), strides=xs, name="x"), "DY": U.t(2, (N, C, H, W), strides=xs, name="dy"),
           "SCALE": U.t(3, (1, C, 1, 1), name="scale"), "MEAN": U.t(4, st, name="mean"),
           "INV_VARIANCE": U.t(5, st, name="inv")}
    outs = {"DX": U.t(10, (N, C, H, W), strides=xs, name="dx"), "DSCALE": U.t(11, (1, C, 1, 1), name="dscale"),
            "DBIAS": U.t(12, (1, C, 1, 1), name="dbias")}
    g = OpGraph([NormBwd("bwd", ins, outs, mode=mode)]).finalize()
    assert _execute(g, rng, positive=("INV_VARIANCE",)).engine_names == ["norm_batch"]


def test_group_norm_refused_with_documented_status():
    ins = {"X": U.t(1, (N, C, H, W)), "SCALE": U.t(2, (1, C, 1, 1)), "BIAS": U.t(3, (1, C, 1, 1)),
           "EPSILON": U.scalar(4, 1e-5)}
    with pytest.raises(CudnnError) as e:
        OpGraph([NormFwd("gn", ins, {"Y": U.t(10, (N, C, H, W))}, mode=NM.CUDNN_GROUP_NORM,
                         phase=PH.CUDNN_NORM_FWD_INFERENCE)]).finalize()
    assert e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED and "GROUP_NORM" in str(e.value)
