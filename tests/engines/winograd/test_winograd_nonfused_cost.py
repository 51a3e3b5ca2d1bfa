"""conv_winograd_nonfused.cost through its per-config constants (``static``: the GEMM tile's
``gc.tile_static`` per device, the problem's GEMM shape and transform time per tile size) equals
``cost_plain`` (``nonfused_cost`` through ``gc.cost``) exactly, for every config of several problems,
with two devices costed alternately on the same subgraph (the memo compares devices by identity)."""
from dataclasses import replace

import pytest

from ncudnn.engines import api, device, registry

from test_winograd_ranking_order import graph

PROBS = [("fprop", 32, 64, 56, 64, True, "f32", True), ("fprop", 32, 512, 7, 512, False, "f16", True),
         ("dgrad", 3, 48, 13, 96, True, "bf16", False), ("fprop", 1, 16, 7, 16, False, "f32", False)]


@pytest.mark.parametrize("prob", PROBS, ids=lambda p: "-".join(map(str, p)))
def test_static_cost_equals_plain_cost_on_two_devices(prob):
    eng = registry.by_name("conv_winograd_nonfused")
    ctx = api.context()
    big, small = ctx.device, replace(device.current(), sm_count=8)
    sub = api.problem(graph(*prob))
    cfgs = eng.configs(sub, ctx)
    assert len(cfgs) >= 2
    differ = 0
    for _ in range(2):                        # the second round answers from the memo
        for cfg in cfgs:
            for dev in (big, small):
                got, want = eng.cost(sub, cfg, dev), eng.cost_plain(sub, cfg, dev)
                assert got == want, (cfg, dev.sm_count, got, want)
                assert 0 < got < 10
            differ += eng.cost(sub, cfg, big) != eng.cost(sub, cfg, small)
    assert differ > 0
    tiles = {eng.static(c)[0] for c in cfgs}
    assert tiles <= {2, 4}


def test_cost_of_another_tile_size_differs():
    eng = registry.by_name("conv_winograd_nonfused")
    ctx = api.context()
    sub = api.problem(graph("fprop", 8, 64, 28, 64, True, "f32", True))
    by_m = {}
    for cfg in eng.configs(sub, ctx):
        by_m.setdefault(eng.static(cfg)[0], set()).add(eng.cost(sub, cfg, ctx.device))
    assert set(by_m) == {2, 4} and not by_m[2] & by_m[4]


def test_keep_refuses_bad_knob_values_with_reasons():
    from ncudnn.types import cudnnBackendKnobType_t as K, cudnnStatus_t as S

    eng = registry.by_name("conv_winograd_nonfused")
    ctx = api.context()
    sub = api.problem(graph("fprop", 2, 16, 8, 16, True, "f32", True))
    good = eng.configs(sub, ctx)[0]
    assert eng.keep(sub, good, ctx)[0] == S.CUDNN_STATUS_SUCCESS
    st, why = eng.keep(sub, good.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 3), ctx)
    assert st != S.CUDNN_STATUS_SUCCESS and "power of 2" in why
    for knob, bad in ((K.CUDNN_KNOB_TYPE_TILE_SIZE, 99), (K.CUDNN_KNOB_TYPE_WINO_TILE, 3),
                      (K.CUDNN_KNOB_TYPE_SWIZZLE, 16)):
        st, why = eng.keep(sub, good.with_knob(knob, bad), ctx)
        assert st != S.CUDNN_STATUS_SUCCESS and why
