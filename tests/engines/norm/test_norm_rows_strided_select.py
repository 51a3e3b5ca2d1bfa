"""Engine "norm_rows": how the strided config is selected (issue #24). Dense layouts keep their plans (the strided
config never ranked, though accepted when asked for); any other layout gets the strided config alone; the
differential fuzzer's norm cases of seed 20261203 that no engine ran before now run."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.fuzz import runner
from ncudnn.ir import NormBwd, NormFwd, OpGraph
from ncudnn.types import (cudnnBackendKnobType_t as K, cudnnBackendNormFwdPhase_t as PH,
                          cudnnBackendNormMode_t as NM, cudnnStatus_t as S)

import membound_util as U
from test_norm_batch_engine import _execute

KC = K.CUDNN_KNOB_TYPE_KERNEL_CFG
XD = (3, 4, 2, 3)


def fwd(xs=None, ys=None, scale_strides=None):
    ins = {"X": U.t(1, XD, strides=xs, name="x"), "SCALE": U.t(2, (1,) + XD[1:], strides=scale_strides, name="scale"),
           "EPSILON": U.scalar(4, 1e-5)}
    return OpGraph([NormFwd("ln", ins, {"Y": U.t(10, XD, strides=ys or xs, name="y")}, mode=NM.CUDNN_RMS_NORM,
                            phase=PH.CUDNN_NORM_FWD_INFERENCE)]).finalize()


def bwd(dxs=None):
    st = (XD[0], 1, 1, 1)
    ins = {"X": U.t(1, XD, name="x"), "DY": U.t(2, XD, name="dy"), "SCALE": U.t(3, (1,) + XD[1:], name="scale"),
           "MEAN": U.t(4, st, name="mean"), "INV_VARIANCE": U.t(5, st, name="inv")}
    outs = {"DX": U.t(10, XD, strides=dxs, name="dx"), "DSCALE": U.t(11, (1,) + XD[1:], name="dscale")}
    return OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_LAYER_NORM)]).finalize()


def _kcfgs(g):
    eng, sub = registry.by_name("norm_rows"), api.problem(g)
    return eng, sub, [c.get(KC) for c in eng.candidates(sub, api.context())]


@pytest.mark.parametrize("g,kc", [(fwd(), 30), (bwd(), 2)])
def test_dense_layouts_never_rank_the_strided_config_but_run_it(rng, g, kc):
    eng, sub, kcs = _kcfgs(g)
    assert kcs and kc not in kcs
    cfg = eng.default_config(sub).with_knob(KC, kc)
    for k, v in cfg.knobs:
        cfg = cfg.with_knob(k, v if k == int(KC) else 0)
    assert eng.keep(sub, cfg, api.context())[0] == S.CUDNN_STATUS_SUCCESS
    ec = api.engine_config_from_json({"engine": "norm_rows", "config": cfg.to_json()}, g, api.context())
    _execute(g, rng, positive=("X", "INV_VARIANCE"), ec=ec)
    assert eng.keep(sub, cfg.with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 32), api.context())[0] == \
        S.CUDNN_STATUS_NOT_SUPPORTED


@pytest.mark.parametrize("g,kc,port", [(fwd(ys=(24, 1, 12, 4)), 30, "Y"),
                                       (fwd(scale_strides=(24, 1, 12, 4)), 30, "SCALE"),
                                       (bwd(dxs=(48, 12, 6, 2)), 2, "DX")])
def test_other_layouts_get_the_strided_config_alone(g, kc, port):
    eng, sub, kcs = _kcfgs(g)
    assert kcs == [kc] and eng.default_config(sub).get(KC) == kc
    st, why = eng.keep(sub, eng.default_config(sub).with_knob(KC, 0), api.context())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and port in why and f"KERNEL_CFG {kc}" in why


@pytest.mark.parametrize("case", [2, 11, 20, 23, 58])
def test_fuzz_cases_no_engine_ran_now_run(case):
    """Seed 20261203's cases of permuted / padded X (2, 11, 20, 58: forward and backward, FP32 and BF16) and of DY /
    SCALE in another layout than X (23): every engine refused them."""
    r = runner.run_case("norm", 20261203, case, draws=1)
    assert r["outcome"] == "ok", (r["desc"], r.get("why", ""))
