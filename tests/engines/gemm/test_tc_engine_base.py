"""TcEngineBase as matmul_tc and conv_tc share it: knobs, keep, candidates (valid, cheapest first, one per
useful tile), the memoized cost and problem (a refusal is remembered and raised again), workspace, notes."""
import math
from dataclasses import replace

from ncudnn.engines import api, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.device import H200
from ncudnn.engines.gemm.tc_base import TcEngineBase, tile_config
from ncudnn.types import cudnnBackendKnobType_t as K, cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnDataType_t as DT, cudnnStatus_t as S
from test_conv_tc_engine import graph as conv_graph
from test_matmul_tc_engine import bias_relu

BF16, F16 = DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_HALF
OK = (S.CUDNN_STATUS_SUCCESS, "")


def ctx():
    return replace(api.context(), allow_tensor_cores=True, device=H200)


def subgraphs():
    yield registry.by_name("matmul_tc"), api.problem(bias_relu(2, 1024, 768, 512, BF16)[0])
    yield registry.by_name("conv_tc"), api.problem(conv_graph((16, 64, 28, 28), (128, 64, 3, 3), F16, F16)[0])


def test_both_engines_run_on_the_base():
    for eng, sub in subgraphs():
        assert isinstance(eng, TcEngineBase)
        assert eng.check_support(sub, ctx()) == OK
        specs = {k.type: k for k in eng.knobs(sub)}
        assert specs[K.CUDNN_KNOB_TYPE_TILE_SIZE].labels == tuple(t.label for t in eng.TILES)
        assert specs[K.CUDNN_KNOB_TYPE_STAGES].default == eng.TILES[0].stages
        assert specs[K.CUDNN_KNOB_TYPE_EDGE].labels == (eng.EDGE_LABEL,)
        d = eng.default_config(sub)
        assert eng.tc_config(d) == tile_config(eng.TILES, d) == eng.TILES[0].cfg
        assert eng.config_notes(sub, d) == (NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE,)
        assert eng.workspace_size(sub, d) == 0


def test_candidates_valid_cheapest_first_cost_memoized():
    for eng, sub in subgraphs():
        cands = eng.candidates(sub, ctx())
        assert cands
        tiles = [c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE) for c in cands]
        assert len(set(tiles)) == len(tiles)                       # one config per tile
        costs = [eng.cost(sub, c, H200) for c in cands]
        assert costs == sorted(costs) and all(0 < x < math.inf for x in costs)
        for c, cost in zip(cands, costs):
            assert eng.keep(sub, c, ctx()) == OK
            assert c.get(K.CUDNN_KNOB_TYPE_STAGES) == eng.TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].stages
            assert eng.cost(sub, c, H200) == cost
        c = cands[0]
        assert "SWIZZLE = 3" in eng.keep(sub, c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 3), ctx())[1]
        sw1 = eng.cost(sub, c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 1), H200)
        assert sw1 >= costs[0]                                   # no tile-row grouping never predicts faster


def test_refusal_is_remembered():
    eng = registry.by_name("matmul_tc")
    sub = api.problem(bias_relu(1, 64, 64, 60, BF16)[0])           # K = 60: not a multiple of 8
    errs = []
    for _ in range(2):
        try:
            eng.problem(sub)
        except gc.Reject as e:
            errs.append(e)
    assert len(errs) == 2 and errs[0] is errs[1] and "K=60" in errs[0].reason
    d = eng.default_config(sub)
    assert eng.candidates(sub, ctx()) == ()
    assert eng.cost(sub, d, H200) == math.inf and eng.workspace_size(sub, d) == 0
    assert eng.check_support(sub, ctx())[0] == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT
