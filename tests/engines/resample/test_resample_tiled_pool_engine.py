"""Resample engine on the register-tiled pooling kernels (ncudnn.kernels.resample.tile): KERNEL_CFG auto
picks them per direction and layout, tiled configs run any applicable tile, refused tiles say why; every
run checked against the float64 oracle with poisoned outputs."""
import pytest

from ncudnn.engines import api
from ncudnn.ir import OpGraph, ResampleBwd
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnPaddingMode_t as PAD, cudnnStatus_t as S

import membound_util as U
from test_norm_batch_engine import _execute
from test_resample_direct_pool_engine import AEX, AIN, MAX, _kernel_names, pool_graph

KC, KTR, KTC = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_TILE_COLS
NCHW_X, NHWC_X = (1, 2, 8, 16), (1, 8, 8, 8)


def _cfg(g, **knobs):
    cfg = api.get_heuristics(g)[0].config
    for k, v in knobs.items():
        cfg = cfg.with_knob({"kc": KC, "th": KTR, "tw": KTC}[k], v)
    return cfg


AUTO_CASES = {   # (mode, pad, layout, x dims, backward source, expected kernels)
    "max_nchw_idx": (MAX, PAD.CUDNN_NEG_INF_PAD, "nchw", NCHW_X, "idx", ["resample_tile_fwd", "resample_tile_bwd"]),
    "max_nchw_x": (MAX, PAD.CUDNN_ZERO_PAD, "nchw", NCHW_X, "x", ["resample_tile_fwd", "resample_tile_bwd"]),
    "avg_nchw": (AIN, PAD.CUDNN_ZERO_PAD, "nchw", NCHW_X, "dy", ["resample_tile_fwd", "resample_tile_bwd"]),
    "max_nchw14_idx": (MAX, PAD.CUDNN_NEG_INF_PAD, "nchw", (1, 2, 8, 14), "idx", ["resample_direct_fwd",
                                                                                 "resample_tile_bwd"]),
    "avg_nchw10": (AIN, PAD.CUDNN_ZERO_PAD, "nchw", (1, 2, 6, 10), "dy", ["resample_direct_fwd", "resample_tile_bwd"]),
    "max_nhwc_x": (MAX, PAD.CUDNN_NEG_INF_PAD, "nhwc", NHWC_X, "x", ["resample_direct_fwd", "resample_tile_bwd"]),
    "avgex_nhwc": (AEX, PAD.CUDNN_ZERO_PAD, "nhwc", NHWC_X, "dy", ["resample_direct_fwd", "resample_tile_bwd"]),
    "max_nhwc_idx": (MAX, PAD.CUDNN_NEG_INF_PAD, "nhwc", NHWC_X, "idx", ["resample_direct_fwd", "resample_tile_bwd"]),
}


@pytest.mark.parametrize("case", sorted(AUTO_CASES))
def test_auto_takes_tiles(rng, case):
    mode, pad, lay, xd, bwd, kernels = AUTO_CASES[case]
    g = pool_graph(mode, xd, (3, 3), (2, 2), (1, 1), pad, lay, idx=bwd == "idx", bwd=bwd)
    plan = _execute(g, rng)
    assert _kernel_names(plan) == kernels
    assert plan.workspace_size == 0


def test_tiled_config_runs_and_direct_forces_direct(rng):
    gf = pool_graph(MAX, NHWC_X, (3, 3), (2, 2), (1, 1), PAD.CUDNN_NEG_INF_PAD, "nhwc", idx=True)
    assert _kernel_names(_execute(gf, rng, ec=_cfg(gf, kc=2, th=2, tw=2))) == ["resample_tile_fwd"]
    assert _kernel_names(_execute(gf, rng, ec=_cfg(gf, kc=2, th=1, tw=4))) == ["resample_tile_fwd"]
    geo = dict(mode=AIN, spatial_dims=2, window=(3, 3), stride=(2, 2), pre_padding=(1, 1), post_padding=(1, 1),
               padding_mode=PAD.CUDNN_ZERO_PAD)
    g = OpGraph([ResampleBwd("pool_bwd", {"DY": U.t(20, (1, 2, 4, 8), name="dy")},
                             {"DX": U.t(21, NCHW_X, name="dx")}, **geo)]).finalize()
    assert _kernel_names(_execute(g, rng, ec=_cfg(g, kc=1))) == ["resample_direct_bwd"]
    assert _kernel_names(_execute(g, rng, ec=_cfg(g, kc=2, th=4, tw=8))) == ["resample_tile_bwd"]


def test_refused_tile_names_the_reason():
    geo = dict(mode=MAX, spatial_dims=2, window=(3, 3), stride=(2, 2), pre_padding=(1, 1), post_padding=(1, 1),
               padding_mode=PAD.CUDNN_NEG_INF_PAD)
    g = OpGraph([ResampleBwd("pool_bwd", {"DY": U.t(20, (1, 2, 4, 8), name="dy"), "X": U.t(1, NCHW_X, name="x")},
                             {"DX": U.t(21, NCHW_X, name="dx")}, **geo)]).finalize()
    st, why = api.check_support(g, _cfg(g, kc=2, th=3, tw=4))
    assert st != S.CUDNN_STATUS_SUCCESS and "multiple of the stride" in why and "pool" in why
    st, why = api.check_support(g, _cfg(g, kc=1, th=2, tw=4))
    assert st != S.CUDNN_STATUS_SUCCESS and "KERNEL_CFG=tiled only" in why
