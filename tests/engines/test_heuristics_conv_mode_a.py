"""Which conv engine mode A ranks first (Winograd on wide FP32 3x3 stride-1 layers, implicit GEMM on
stride 2 and on few channels), and that an autotune record of a problem overrides mode A in mode B."""
import pytest

from ncudnn.engines import api, autotune, device, heuristics
from ncudnn.types import cudnnBackendHeurMode_t as HM

from test_heuristics_fast_ranking import conv_graph

WINO = ("conv_winograd_nonfused", "conv_winograd_fused")
IGEMM = ("conv_implicit_gemm", "conv_implicit_precomp", "conv_gemm_1x1")


@pytest.mark.parametrize("n,c,h,k,nhwc", [(32, 64, 56, 64, True), (32, 128, 28, 128, True), (32, 256, 14, 256, False),
                                          (32, 512, 7, 512, True), (64, 64, 28, 128, False)])
def test_winograd_first_on_wide_3x3_stride_1(n, c, h, k, nhwc):
    ecs = api.get_heuristics(conv_graph(n, c, h, k, nhwc=nhwc), HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].name in WINO, [str(e) for e in ecs[:3]]
    best_igemm = min(e.predicted_time for e in ecs if e.name in IGEMM)
    assert ecs[0].predicted_time < best_igemm / 1.3  # a clear margin, not a tie


@pytest.mark.parametrize("n,c,h,k", [(32, 64, 56, 64), (32, 256, 56, 128), (8, 512, 28, 512)])
def test_implicit_gemm_first_on_stride_2(n, c, h, k):
    ecs = api.get_heuristics(conv_graph(n, c, h, k, stride=2), HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].name in IGEMM and not any(e.name in WINO for e in ecs)


@pytest.mark.parametrize("n,c,h,k", [(32, 16, 56, 16), (32, 32, 56, 32), (32, 8, 112, 8), (32, 3, 224, 64),
                                     (32, 64, 56, 32)])
def test_implicit_gemm_first_on_few_channels(n, c, h, k):
    ecs = api.get_heuristics(conv_graph(n, c, h, k), HM.CUDNN_HEUR_MODE_A)
    assert ecs[0].name in IGEMM, [str(e) for e in ecs[:3]]
    wino = [e for e in ecs if e.name in WINO]
    assert wino, "Winograd stays offered, after the implicit GEMM configs"
    assert all("demoted" in e.why for e in wino)
    first_wino = ecs.index(wino[0])
    assert all(e.name not in WINO for e in ecs[:first_wino])


def test_demotion_is_logged():
    from ncudnn import log as nlog

    seen = []
    nlog.cudnnSetCallback(nlog.CUDNN_SEV_INFO_EN | nlog.CUDNN_SEV_ERROR_EN, None,
                          lambda sev, ud, dbg, msg: seen.append(msg))
    try:
        api.get_heuristics(conv_graph(4, 16, 20, 24), HM.CUDNN_HEUR_MODE_A)
    finally:
        nlog.reload_from_env()
    text = "\n".join(seen)
    assert "ranked after the others: Winograd on 16 input / 24 output channels" in text


@pytest.mark.parametrize("shape", [(32, 128, 28, 128), (32, 16, 56, 16)], ids=["wide", "few_channels"])
def test_a_measured_time_overrides_mode_a(cache_dir, shape):
    """A timing recorded for this problem and config (autotuning) puts mode A's last config ahead of
    mode A's first in mode B, whatever the model or the demotion rule said (the record also scales the
    model of the last config's engine: its other configs may move up with it)."""
    g = conv_graph(*shape)
    a = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    last = [e for e in a if e.name != "composite"][-1]  # the last fused config (the unfused composite follows)
    heuristics.table(device.current()).record(last.name, last.predicted_time, a[0].predicted_time * 0.5, g.key(),
                                              last.config)
    b = api.get_heuristics(conv_graph(*shape), HM.CUDNN_HEUR_MODE_B)
    order = [e.config for e in b]
    mine = b[order.index(last.config)]
    assert mine.why == "measured" and mine.predicted_time == a[0].predicted_time * 0.5
    assert order.index(last.config) < order.index(a[0].config)
    assert all(e.name == last.name for e in b[:order.index(last.config)])
    assert sorted(str(c) for c in order) == sorted(str(e.config) for e in a)
    assert api.get_heuristics(conv_graph(*shape), HM.CUDNN_HEUR_MODE_A)[0].config == a[0].config  # A unchanged


def test_a_stored_autotune_winner_comes_first_in_mode_b(cache_dir):
    g = conv_graph(32, 64, 56, 64)
    a = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    win = next(e for e in a if e.name in IGEMM)  # the model prefers Winograd here; the tuner disagreed
    rows = [{"config": win.to_json(), "median_ms": 0.05, "clock": "cuda_events"},
            {"config": a[0].to_json(), "median_ms": 0.09, "clock": "cuda_events"}]
    autotune._save(device.current(), api.graph_key(g), rows)
    b = api.get_heuristics(conv_graph(32, 64, 56, 64), HM.CUDNN_HEUR_MODE_B)
    assert b[0].ident() == win.ident() and b[0].why == "autotuned winner (measured)"
    assert b[0].predicted_time == pytest.approx(0.05e-3)
    assert len(b) == len(a)
