"""Engine "norm_rows" forward CTA_COUNT: a persistent grid (SMs x CTA_COUNT blocks, each looping over rows) of
the 16-byte row kernel, block and warp-per-row modes, through the engine API against the float64 oracle."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.kernels.primitives import warp as kprim
from ncudnn.ir.partition import partition
from ncudnn.testing import size
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNormMode_t as NM

from test_norm_batch_engine import _execute
from test_norm_rows_engine import fwd_graph

KB, KR, KL, KW, KS = (K.CUDNN_KNOB_TYPE_BLOCK_SIZE, K.CUDNN_KNOB_TYPE_TILE_ROWS, K.CUDNN_KNOB_TYPE_LOAD_SIZE,
                      K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_STAGES)


@pytest.mark.parametrize("mode", [NM.CUDNN_LAYER_NORM, NM.CUDNN_RMS_NORM], ids=["layer", "rms"])
@pytest.mark.parametrize("block,rpb,stages", [(128, 0, 0), (32, 2, 0), (128, 0, 2), (32, 2, 2), (256, 0, 2)],
                         ids=["block128", "warp-r2", "block128-prefetch", "warp-r2-prefetch", "block256-prefetch"])
def test_persistent_forward(rng, mode, block, rpb, stages):
    """9 rows on the simulator's 2 SMs x 1 block (1000 on a GPU): each block loops over several rows
    (warp mode: rows not a multiple of the block's 2); STAGES 2 loads the next row early (block 256 on
    rows of 240 vectors: slots past the row's end)."""
    n = 960 if block == 256 else 512
    rows = size(9, 1000)               # more row groups than SMs x 1 block (2 simulated SMs, 132 on an H200)
    g = fwd_graph(mode, dims=(rows, n), bias=mode == NM.CUDNN_LAYER_NORM)
    cfg = api.get_heuristics(g)[0].config.with_knob(K.CUDNN_KNOB_TYPE_KERNEL_CFG, 0).with_knob(KB, block).with_knob(KR, rpb).with_knob(KL, 16).with_knob(KW, 1) \
        .with_knob(KS, stages)
    plan = _execute(g, rng, positive=("X",), ec=cfg)
    step = plan.parts[0].steps[0]
    assert step.key.startswith("norm_rows_fwd_vec:") and step.grid == kprim.sm_count()


def test_cta_count_needs_the_vector_kernel():
    g = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(3, 6))
    eng, sub = registry.by_name("norm_rows"), partition(g)[0][0]
    st, why = eng.keep(sub, api.get_heuristics(g)[0].config.with_knob(KW, 4), None)
    assert st != 0 and "CTA_COUNT" in why
    g2 = fwd_graph(NM.CUDNN_LAYER_NORM, dims=(8192, 1024))
    assert any(e.config.get(KW) for e in api.get_heuristics(g2))
    assert api.get_heuristics(g2)[0].config.get(KW) == 0
