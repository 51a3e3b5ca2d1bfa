"""Engines "bn_finalize" and "bn_bwd_weights" through the engine API against the float64 oracle."""
import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.ir import BnBwdWeights, BnFinalize, OpGraph
from ncudnn.reference.ops import run_node
from ncudnn.testing import assert_close
from ncudnn.types import cudnnBnFinalizeStatsMode_t as BF, cudnnDataType_t as DT, cudnnStatus_t as S

import membound_util as U

C = 5
CH = (1, C, 1, 1)


def _check(g, rng, positive=(), scalars=None):
    node = g.nodes[0]
    ins, pack, outs = {}, {}, {}
    for p, t in node.inputs.items():
        if t.is_by_value:
            ins[p] = np.float64(t.value)
            continue
        lo, hi = (0.5, 2.0) if p in positive else (-1.0, 1.0)
        a = rng.uniform(lo, hi, t.dims)
        ins[p] = U.cast(a, t.dtype)
        pack[t.uid] = U.upload(a, t)
    for p, t in node.outputs.items():
        outs[p] = pack[t.uid] = U.poisoned(t)
    plan = U.run(g, pack)
    ref = run_node(node, ins)
    for p, t in node.outputs.items():
        assert_close(U.download(outs[p], t), ref[p], "float32", name=p)
    return plan


@pytest.mark.parametrize("training", [True, False])
def test_bn_finalize(rng, training):
    mode = BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING if training else BF.CUDNN_BN_FINALIZE_STATISTICS_INFERENCE
    ins = {p: U.t(k + 1, CH, name=p) for k, p in enumerate(("SUM", "SQSUM", "SCALE", "BIAS", "PREV_RUNNING_MEAN",
                                                             "PREV_RUNNING_VAR"))}
    ins["EPSILON"] = U.scalar(20, 1e-3, "eps")
    ins["ACCUM_COUNT"] = U.scalar(21, 12, "count", DT.CUDNN_DATA_INT64)
    ins["EXP_AVG_FACTOR"] = U.scalar(22, 0.25, "momentum")
    outs = {p: U.t(30 + k, CH, name=p) for k, p in enumerate(("EQ_SCALE", "EQ_BIAS", "UPDATED_RUNNING_MEAN",
                                                              "UPDATED_RUNNING_VAR"))}
    if training:
        outs.update(SAVED_MEAN=U.t(40, CH, name="sm"), SAVED_INV_STD=U.t(41, CH, name="si"))
    g = OpGraph([BnFinalize("fin", ins, outs, mode=mode)]).finalize()
    # SQSUM large enough that the variance is positive
    plan = _check(g, rng, positive=("SQSUM", "PREV_RUNNING_VAR") if training else ("PREV_RUNNING_VAR",))
    assert plan.engine_names == ["bn_finalize"]


def test_bn_finalize_device_epsilon_and_momentum(rng):
    """EPSILON and EXP_AVG_FACTOR as one-element device tensors: the kernel reads them."""
    ins = {p: U.t(k + 1, CH, name=p) for k, p in enumerate(("SUM", "SQSUM", "SCALE", "BIAS", "PREV_RUNNING_MEAN",
                                                             "PREV_RUNNING_VAR"))}
    ins["EPSILON"] = U.t(20, (1, 1, 1, 1), name="eps")
    ins["ACCUM_COUNT"] = U.scalar(21, 12, "count", DT.CUDNN_DATA_INT64)
    ins["EXP_AVG_FACTOR"] = U.t(22, (1, 1, 1, 1), name="momentum")
    outs = {p: U.t(30 + k, CH, name=p) for k, p in enumerate(("EQ_SCALE", "EQ_BIAS", "UPDATED_RUNNING_MEAN",
                                                              "UPDATED_RUNNING_VAR", "SAVED_MEAN", "SAVED_INV_STD"))}
    g = OpGraph([BnFinalize("fin", ins, outs, mode=BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING)]).finalize()
    plan = _check(g, rng, positive=("SQSUM", "PREV_RUNNING_VAR", "EPSILON", "EXP_AVG_FACTOR"))
    assert plan.engine_names == ["bn_finalize"]


def test_bn_finalize_device_epsilon_needs_one_element():
    ins = {p: U.t(k + 1, CH, name=p) for k, p in enumerate(("SUM", "SQSUM", "SCALE", "BIAS"))}
    ins["EPSILON"] = U.t(20, (1, 2, 1, 1), name="eps")
    ins["ACCUM_COUNT"] = U.scalar(21, 12, "count", DT.CUDNN_DATA_INT64)
    g = OpGraph([BnFinalize("fin", ins, {"EQ_SCALE": U.t(30, CH), "EQ_BIAS": U.t(31, CH)})]).finalize()
    st, why = registry.by_name("bn_finalize").check_support(api.problem(g), api.context())
    assert st == S.CUDNN_STATUS_BAD_PARAM and "EPSILON" in why and "'fin'" in why


def test_bn_bwd_weights(rng):
    x = U.t(1, (3, C, 2, 2), name="x")
    ins = {"X": x}
    ins.update({p: U.t(k + 2, CH, name=p) for k, p in enumerate(("MEAN", "INV_STD", "SCALE", "DY_SUM", "DY_X_SUM"))})
    outs = {p: U.t(20 + k, CH, name=p) for k, p in enumerate(("DSCALE", "DBIAS", "EQ_DY_SCALE", "EQ_X_SCALE",
                                                              "EQ_BIAS"))}
    g = OpGraph([BnBwdWeights("bw", ins, outs)]).finalize()
    plan = _check(g, rng, positive=("INV_STD",))
    assert plan.engine_names == ["bn_bwd_weights"]
