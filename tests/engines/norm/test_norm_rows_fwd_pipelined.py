"""Engine "norm_rows": the pipelined forward (KERNEL_CFG 20..29, engines/norm/rows_pipe.py) through the engine API vs
the float64 oracle, its default and its refusals."""
import pytest

from ncudnn.engines import api
from ncudnn.engines.norm.rows_pipe import FWD_PIPE_KCFG
from ncudnn.kernels.primitives import warp as kprim
from ncudnn.testing import size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT

from test_norm_batch_engine import _execute
from test_norm_rows_engine import fwd_graph

KC, BS, TR, KS, KL = (K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS,
                      K.CUDNN_KNOB_TYPE_STAGES, K.CUDNN_KNOB_TYPE_LOAD_SIZE)


def _pipe(g, kc):
    cfg = api.get_heuristics(g)[0].config
    for k, v in ((KC, kc), (BS, 0), (TR, 0), (KS, 0), (KL, 16), (K.CUDNN_KNOB_TYPE_CTA_COUNT, 0)):
        cfg = cfg.with_knob(k, v)
    return cfg


# the simulator: three geometries (2 SMs: grids of 4..8 blocks of 64..256 threads); the GPU: every one
@pytest.mark.parametrize("kc", size((20, 23, 24, 28), tuple(FWD_PIPE_KCFG)))
@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_nrp_eng_pipe_runs(rng, mode, kc):
    # rows never a multiple of the grid's warps (GPU: 4099 rows of 1024; 8192 in the benchmark)
    g = fwd_graph(mode, dims=size((13, 2, 128), (4099, 1024)), bias=mode == NM.CUDNN_LAYER_NORM)
    plan = _execute(g, rng, positive=("X",), ec=_pipe(g, kc))
    step = plan.parts[0].steps[0]
    warps, stages, bps = FWD_PIPE_KCFG[kc][:3]
    assert step.name == "norm_rows_fwd_pipe" and step.grid == kprim.sm_count() * bps and step.block == 32 * warps


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_nrp_eng_pipe_inference(rng, mode):
    g = fwd_graph(mode, dims=size((5, 128), (1000, 512)), training=False)
    plan = _execute(g, rng, positive=("X",), ec=_pipe(g, 21))
    assert plan.parts[0].steps[0].name == "norm_rows_fwd_pipe"


def test_nrp_eng_pipe_default():
    """KERNEL_CFG 28 (x's copies evict-first, y's stores plain) is the first config for FP32 rows of 512..1024 with
    two rows a warp of the grid (2 x SMs x 3 x 4); the sub-block default (KERNEL_CFG 13, y plain too) with fewer rows,
    shorter rows or 16-bit data."""
    def first(mode, dims, dtype=DT.CUDNN_DATA_FLOAT):
        c = api.get_heuristics(fwd_graph(mode, dims=dims, dtype=dtype))[0].config
        return c.get(KC), c.get(BS), c.get(TR), c.get(KS), c.get(KL)

    enough = 2 * kprim.sm_count() * 3 * 4
    for mode in (NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM):
        assert first(mode, (enough, 1024)) == (28, 0, 0, 0, 16)
        assert first(mode, (8192, 4, 256)) == (28, 0, 0, 0, 16)
        assert first(mode, (enough - 1, 1024)) == (13, 128, 1, 1, 16)
        assert first(mode, (enough, 512)) == (28, 0, 0, 0, 16)
        assert first(mode, (enough, 8, 96)) == (28, 0, 0, 0, 16)
        assert first(mode, (enough, 384))[0] not in FWD_PIPE_KCFG
        assert first(mode, (enough - 1, 512))[0] == 13
        assert first(mode, (enough, 1024), DT.CUDNN_DATA_BFLOAT16)[0] not in FWD_PIPE_KCFG
        assert first(mode, (enough, 4096))[0] == 0


def test_nrp_eng_pipe_refusals():
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 1024))
    ok = _pipe(g, 20)
    assert int(api.check_support(g, ok)[0]) == 0
    for cfg, words in ((ok.with_knob(BS, 128), "BLOCK_SIZE"), (ok.with_knob(KL, 0), "LOAD_SIZE 16"),
                       (ok.with_knob(KC, 19), "not 0")):
        st, why = api.check_support(g, cfg)
        assert int(st) != 0 and words in why, why
    for g2, words in ((fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 2048)), "at most 1024"),
                      (fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 1000)), "multiple of 128"),
                      (fwd_graph(NM.CUDNN_RMS_NORM, dims=(64, 1024), dtype=DT.CUDNN_DATA_HALF), "FP32"),
                      (fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 1024), relu=True), "epilogue")):
        st, why = api.check_support(g2, _pipe(g2, 20))
        assert int(st) != 0 and words in why, why
    assert not any(e.config.get(KC, 0) in FWD_PIPE_KCFG
                   for e in api.get_heuristics(fwd_graph(NM.CUDNN_LAYER_NORM, dims=(64, 2048))))


def test_nrp_eng_pipe_candidates_follow_dtypes():
    """Candidate lists are memoized per problem key: an FP16 X with FP32 Y (16-byte vectors of 4 too) must not reuse
    the all-FP32 problem's list, which holds the pipelined configs."""
    from ncudnn.engines import registry
    from ncudnn.ir import NormFwd, OpGraph
    from ncudnn.ir.partition import partition
    from ncudnn.types import cudnnBackendNormFwdPhase_t as PH

    import membound_util as U

    eng = registry.get("norm_rows")
    f32 = partition(fwd_graph(NM.CUDNN_RMS_NORM, dims=(64, 1024), bias=False))[0][0]
    d = (64, 1024)
    ins = {"X": U.t(1, d, DT.CUDNN_DATA_HALF, name="x"), "SCALE": U.t(2, (1, 1024), name="scale"),
           "EPSILON": U.scalar(4, 1e-5)}
    outs = {"Y": U.t(10, d, name="y"), "INV_VARIANCE": U.t(12, (64, 1), name="inv")}
    mixed = partition(OpGraph([NormFwd("rms", ins, outs, mode=NM.CUDNN_RMS_NORM,
                                       phase=PH.CUDNN_NORM_FWD_TRAINING)]).finalize())[0][0]
    assert eng.candidates_key(f32) != eng.candidates_key(mixed)
    assert any(c.get(KC, 0) in FWD_PIPE_KCFG for c in eng.candidates(f32, None))
    assert not any(c.get(KC, 0) in FWD_PIPE_KCFG for c in eng.candidates(mixed, None))


def test_nrp_eng_defaults_store_y_plain():
    """The forward defaults read x evict-first but store y with no L2 policy: evict-first y stores made the kernel
    alone no faster on the H200 and left y out of the L2 for the next kernel (LN 8192x1024 then a sum of y: 0.88x
    cuDNN against 1.03x; session 8, experiments/probe_norm_sweep.py --consumer)."""
    from ncudnn.engines.norm.rows_fwd import FWD_SUB_DEFAULT, FWD_SUB_KCFG
    from ncudnn.engines.norm.rows_pipe import FWD_PIPE_DEFAULT

    for _, _, kc in FWD_PIPE_DEFAULT:
        assert FWD_PIPE_KCFG[kc][5] == "evict_first" and FWD_PIPE_KCFG[kc][6] is False
    for _, (kc, *_), *_ in FWD_SUB_DEFAULT:
        assert len(FWD_SUB_KCFG[kc]) < 6 or FWD_SUB_KCFG[kc][5] is None
