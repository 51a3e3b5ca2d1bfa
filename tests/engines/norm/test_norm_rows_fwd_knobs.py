"""Engine "norm_rows" forward knobs TILE_ROWS (rows a warp-per-row block) and LOAD_SIZE (16-byte
accesses) through the engine API against the float64 oracle."""
import pytest

from ncudnn.engines import api
from ncudnn.testing import size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM, cudnnStatus_t as S

import membound_util as U
from test_norm_batch_engine import _execute
from test_norm_rows_engine import fwd_graph

KB, KR, KL = K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE


def _pick(g, block, rows, load):
    ecs = [e for e in api.get_heuristics(g) if (e.config.get(KB), e.config.get(KR), e.config.get(KL))
           == (block, rows, load)]
    assert ecs, (block, rows, load)
    return ecs[0]


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
@pytest.mark.parametrize("block,rows,load", [(0, 2, 16), (32, 8, 0), (128, 0, 16)],
                         ids=["warp-r2-vec", "warp-r8-scalar", "block128-vec"])
def test_forward_knobs(rng, mode, block, rows, load):
    g = fwd_graph(mode, dims=(5, 2, 4, 8), bias=mode == NM.CUDNN_LAYER_NORM)
    plan = _execute(g, rng, positive=("X",), ec=_pick(g, block, rows, load))  # row means away from 0
    name = plan.parts[0].steps[0].key
    assert name.startswith("norm_rows_fwd_vec:" if load else "norm_rows_fwd:"), name


def test_forward_vec_with_epilogue_half(rng):
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 16), dtype=U.DT.CUDNN_DATA_HALF, training=False, relu=True)
    plan = _execute(g, rng, positive=("X",), tol="float16", ec=_pick(g, 32, 0, 16))
    assert plan.parts[0].steps[0].key.startswith("norm_rows_fwd_vec:")


def test_default_config_and_refusals():
    from ncudnn.engines import registry
    from ncudnn.ir.partition import partition

    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 6))           # 6 floats a row: no 16-byte vectors
    first = api.get_heuristics(g)[0].config
    assert (first.get(KB), first.get(KR), first.get(KL)) == (0, 0, 0)
    assert not any(e.config.get(KL) for e in api.get_heuristics(g))
    eng, sub = registry.get("norm_rows"), partition(g)[0][0]
    st, why = eng.keep(sub, first.with_knob(KL, 16), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "LOAD_SIZE" in why
    st, why = eng.keep(sub, first.with_knob(KR, 3), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "TILE_ROWS" in why
    g2 = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 2000))       # block per row: TILE_ROWS refused
    sub2 = partition(g2)[0][0]
    st, why = eng.keep(sub2, api.get_heuristics(g2)[0].config.with_knob(KR, 2), None)
    assert st != S.CUDNN_STATUS_SUCCESS and "warp-per-row" in why


def _first(mode, dims, **kw):
    c = api.get_heuristics(fwd_graph(mode, dims=dims, **kw))[0].config
    return c.engine, (c.get(KB), c.get(KR), c.get(KL))


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_default_is_the_measured_vector_config(mode):
    """The heuristic's first config (no kernel runs: the shapes are the H200 benchmark's). 8192 rows of 512..1024 FP32
    columns take the pipelined kernel (norm_rows_pipe.FWD_PIPE_DEFAULT: its KERNEL_CFG names the geometry, the
    other knobs 0); fewer rows the sub-block kernel at 128 threads a row (norm_rows.FWD_SUB_DEFAULT), shorter RMS
    rows a warp a row, 4 rows a block."""
    rms = mode == NM.CUDNN_RMS_NORM
    assert _first(mode, (8192, 1024)) == ("norm_rows", (0, 0, 16))
    assert _first(mode, (16, 1024)) == ("norm_rows", (128, 1, 16))
    assert _first(mode, (8192, 512)) == ("norm_rows", (0, 0, 16))
    assert _first(mode, (16, 512)) == ("norm_rows", (128, 1, 16))
    assert _first(mode, (8192, 2048)) == ("norm_rows", (128, 0, 16))
    assert _first(mode, (8192, 4096)) == ("norm_rows", (256, 0, 16))
    assert _first(mode, (64, 8, 16)) == ("norm_rows", (32, 4, 16) if rms else (32, 0, 16))   # 128 floats: warp per row
    assert _first(mode, (8, 16384)) == ("norm_rows", (0, 0, 0))           # too long for registers
    assert _first(mode, (64, 1022)) == ("norm_rows", (0, 0, 0))           # no 16-byte vectors


def test_backward_default_unchanged():
    from ncudnn.ir import OpGraph, NormBwd

    d, st = (64, 1024), (64, 1)
    ins = {"X": U.t(1, d, name="x"), "DY": U.t(2, d, name="dy"), "SCALE": U.t(3, (1, 1024), name="scale"),
           "MEAN": U.t(4, st, name="mean"), "INV_VARIANCE": U.t(5, st, name="inv")}
    g = OpGraph([NormBwd("bwd", ins, {"DX": U.t(10, d, name="dx")}, mode=NM.CUDNN_LAYER_NORM)]).finalize()
    c = api.get_heuristics(g)[0].config
    assert c.engine == "norm_rows" and (c.get(KB), c.get(KR), c.get(KL)) == (0, 0, 0)


@pytest.mark.parametrize("dims,threads", [(size((3, 512), (8192, 1024)), 128), (size((2, 2560), (8192, 4096)), 256)],
                         ids=["128", "256"])
@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
def test_default_runs_the_vector_kernel(rng, mode, dims, threads):
    g = fwd_graph(mode, dims=dims, bias=mode == NM.CUDNN_LAYER_NORM)
    # X in (0.5, 2): a row mean near zero would make its relative error meaningless (CI: a 2e-3 mean
    # off by 7e-8 failed the 1e-5 bound)
    ec = api.get_heuristics(g)[0]
    plan = _execute(g, rng, positive=("X",), ec=ec)
    # 8192 rows of 1024 FP32 columns: the pipelined kernel (4 warps a block); rows of 512..1024 columns otherwise the
    # sub-block kernel (norm_rows.FWD_SUB_DEFAULT: 128 threads a row, x loaded evict-first); longer rows the row
    # kernel
    kc = ec.config.get(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0)
    if dims[1] > 1024:
        assert not kc
    elif dims == (8192, 1024):
        assert kc == 28
    kind = "norm_rows_fwd_pipe:" if kc >= 20 else "norm_rows_fwd_sub:" if kc else "norm_rows_fwd_vec:"
    assert plan.parts[0].steps[0].key.startswith(kind)
    assert plan.parts[0].steps[0].block == threads
