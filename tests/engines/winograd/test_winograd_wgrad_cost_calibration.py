"""conv_winograd_nonfused wgrad cost model against the H200 measurements of 2026-11-30 (FP32, N = 32,
NCHW, pad 1, docs/winograd.md): at the splits that were measured, the predicted total and per-kernel
times are within the stated bounds; mode A's order of F(3x3, 2x2) and F(3x3, 4x4) per layer."""
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.winograd import common as cwc
from ncudnn.kernels.winograd import wgrad as ww
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K

from test_winograd_wgrad_engine import ENGINE, wgrad_graph

#: name: (C, K, H = W)
LAYERS = {"c4_256": (256, 256, 14), "c3_128": (128, 128, 28), "c5_512": (512, 512, 7), "c2_64": (64, 64, 56),
          "c128_k256": (128, 256, 56)}
#: (layer, r): (S measured, total ms, GEMM ms, output-kernel ms), H200 2026-11-30, NCHW
MEASURED = {("c4_256", 2): (2, .1511, .1162, .0094), ("c4_256", 4): (4, .2079, .1394, .0268),
            ("c3_128", 2): (8, .1716, .1173, .0080), ("c3_128", 4): (7, .1790, .0872, .0379),
            ("c5_512", 2): (1, .2024, .1580, .0259), ("c5_512", 4): (1, .1940, .1387, .0373),
            ("c2_64", 2): (8, .4951, .4025, None), ("c2_64", 4): (11, .2629, .1078, .0554),
            ("c128_k256", 2): (4, 1.0441, .8068, .0071), ("c128_k256", 4): (11, .7958, .5105, .1229)}


def predicted_at(monkeypatch, name, r, S):
    """(total, GEMM, output kernel) predicted seconds of tile r's first candidate with the split forced to S
    and the output kernel that was measured (KCRS dw stored 9 scattered floats per thread)."""
    c, k, h = LAYERS[name]

    def forced(K_, C_, T, a2, *a, **kw):
        return S, -(-(-(-T // S)) // ww.CHUNK) * ww.CHUNK

    monkeypatch.setattr(ww, "splits", forced)
    monkeypatch.setattr(ww, "packed_dw", lambda *a: False)     # measured: the scattered KCRS dw stores
    g, *_ = wgrad_graph(32, c, h, h, k, 1)
    eng, dev = registry.by_name(ENGINE), api.context().device
    sub = api.problem(g)
    p = eng.problem(sub)
    cfg = next(cf for cf in eng.candidates(sub, api.context()) if cf.get(K.CUDNN_KNOB_TYPE_WINO_TILE) == r)
    total = eng.cost(sub, cfg, dev)
    parts = cwc.wgrad_transform_parts(dev, p, r)
    return total, total - sum(parts), parts[2]


@pytest.mark.parametrize("name,r", sorted(MEASURED))
def test_prediction_near_measured(monkeypatch, name, r):
    S, tot, gemm, out = MEASURED[(name, r)]
    t, g, o = (v * 1e3 for v in predicted_at(monkeypatch, name, r, S))
    assert abs(t / tot - 1) < 0.15, (t, tot)
    if (name, r) != ("c2_64", 4):       # the 64x64x16 GEMM tile runs ~25% under the model
        assert abs(g / gemm - 1) < 0.12, (g, gemm)
    if out is not None:
        assert 0.6 < o / out < 1.6, (o, out)


def test_packed_dw_store_is_cheaper():
    """KCRS dw through the packed output kernel (coalesced stores) is predicted cheaper than scattered."""
    g, *_ = wgrad_graph(32, 512, 7, 7, 512, 1)
    eng, dev = registry.by_name(ENGINE), api.context().device
    p = eng.problem(api.problem(g))
    assert ww.packed_dw(p.w_strides, p.C)
    packed = cwc.wgrad_transform_parts(dev, p, 2)[2]
    p.w_strides = (9 * p.C + 1, 9, 3, 1)     # a padded filter row: not packed, scattered stores
    assert not ww.packed_dw(p.w_strides, p.C)
    assert cwc.wgrad_transform_parts(dev, p, 2)[2] > 2 * packed


def test_output_kernel_cost_grows_with_splits_and_tile(monkeypatch):
    """The F(3x3, 4x4) output kernel's passes over S: ~5.5 us each (4x F(3x3, 2x2)'s), doubled past the L2."""
    o2 = predicted_at(monkeypatch, "c3_128", 2, 7)[2]
    o4 = predicted_at(monkeypatch, "c3_128", 4, 7)[2]
    o4_2 = predicted_at(monkeypatch, "c3_128", 4, 2)[2]
    assert o4 > 3 * o2 and o4 > 2.5 * o4_2


def best_tile(c, k, h, nhwc):
    g, *_ = wgrad_graph(32, c, h, h, k, 1, nhwc=nhwc)
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].name == ENGINE, [str(e) for e in ecs[:3]]
    return ecs[0].config.get(K.CUDNN_KNOB_TYPE_WINO_TILE)


@pytest.mark.parametrize("name,nhwc,r", [("c4_256", False, 2), ("c4_256", True, 2), ("c5_512", False, 2),
                                         ("c5_512", True, 2), ("c2_64", False, 4), ("c2_64", True, 4),
                                         ("c128_k256", False, 4), ("c128_k256", True, 4)])
def test_mode_a_tile_per_layer(name, nhwc, r):
    """F(3x3, 2x2) first on the short reductions (14x14, 7x7: the F(3x3, 4x4) output kernel and
    short GEMM chunks cost more than its GEMM saves), F(3x3, 4x4) on the 56x56 layers."""
    c, k, h = LAYERS[name]
    assert best_tile(c, k, h, nhwc) == r
