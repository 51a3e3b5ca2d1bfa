"""Cold ranking of the Winograd engines: the ranked (engine, knobs, predicted time) list, the support
verdict and the workspace are what the straightforward computation gives (every config generated,
checked and costed from scratch, no memo), on 3x3 problems drawn fresh each run (N 1..128, C / K
16..512, H 7..224, NCHW / NHWC, FP32 / FP16 / BF16, fprop / dgrad); support is decided without
costing a config."""
import math

import pytest

from ncudnn.engines import api, device, heuristics, registry
from ncudnn.engines.winograd import common as cw
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.base import Engine
from ncudnn.engines.winograd.fused import FUSED_TILES
from ncudnn.engines.ranking import rank_subgraph
from ncudnn.ir import ConvDgrad, ConvFprop, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.kernels.winograd import kernels as wk
from ncudnn.kernels.winograd.fused import check as fused_check
from ncudnn.platform import simulator_enabled
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnStatus_t as S

NONFUSED, FUSED = "conv_winograd_nonfused", "conv_winograd_fused"
DTYPES = {"f32": DT.CUDNN_DATA_FLOAT, "f16": DT.CUDNN_DATA_HALF, "bf16": DT.CUDNN_DATA_BFLOAT16}
ATTRS = dict(spatial_dims=2, stride=(1, 1), pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1))


def _t(uid, dims, dt, nhwc):
    return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(4) if nhwc else None), dt, name=f"t{uid}")


def graph(kind, n, c, h, k, nhwc=True, dtype="f32", epilogue=True, groups=1):
    """A 3x3 stride-1 pad-1 conv: fprop (+ bias + relu when ``epilogue``) or dgrad."""
    dt = DTYPES[dtype]
    wdims = (k, c // groups, 3, 3)
    if kind == "dgrad":
        node = ConvDgrad("d", {"DY": _t(1, (n, k, h, h), dt, nhwc), "W": _t(2, wdims, dt, nhwc)},
                         {"DX": _t(3, (n, c, h, h), dt, nhwc)}, **ATTRS)
        return OpGraph([node], compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()
    x, w, y = _t(1, (n, c, h, h), dt, nhwc), _t(2, wdims, dt, nhwc), _t(4, (n, k, h, h), dt, nhwc)
    if not epilogue:
        return OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **ATTRS)],
                       compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()
    v1, v2 = TensorDesc(10, is_virtual=True, name="v10"), TensorDesc(11, is_virtual=True, name="v11")
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": v1}, **ATTRS)
    return OpGraph([conv, Pointwise("bias", {"X": v1, "B": _t(3, (1, k, 1, 1), dt, nhwc)}, {"Y": v2},
                                    mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": v2}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)],
                   compute_dtype=DT.CUDNN_DATA_FLOAT).finalize()


# ------------------------------------------------------------------ the straightforward computation

def _sizes(p, m):
    th, tw = math.ceil(p.P / m), math.ceil(p.Q / m)
    T, a2 = p.N * th * tw, (m + 2) ** 2
    return T, a2, (a2 * p.K * p.Cg, a2 * p.C * T, a2 * p.K * T), (p.Kg, T, p.Cg, a2 * p.G)


def _transform_time(dev, p, m):
    T, a2, (nu, nv, nm), _ = _sizes(p, m)
    filt = p.K * p.Cg * 9 * gc.bytes_of(p.dt_w) + nu * 4
    inp = p.N * p.C * p.H * p.W * p.in_bytes * (a2 / (m * m)) ** 0.5 + nv * 4
    out = nm * 4 + p.N * p.K * p.P * p.Q * p.out_bytes + p.extra_bytes
    t = 0.0
    for nbytes, threads in ((filt, p.K * p.C), (inp, p.C * T), (out, p.K * T)):
        t += heuristics.kernel_time(dev, nbytes=nbytes, blocks=wk.blocks(threads), threads=wk.THREADS, regs=64,
                                    bytes_in_flight=min(threads, dev.sm_count * 2048) * 4 * a2)
    return t


def _nonfused(eng, sub, p, dev):
    """[(config, cost)] in configs() order: WINO_TILE x useful tiles x one swizzle, kept, costed."""
    tiles, out = eng.TILES, []
    base = eng.default_config(sub)
    for m in (2, 4):
        T, a2, sizes, (Mg, Ng, Kg, batch) = _sizes(p, m)
        for t in gc.useful_tiles(tiles, Mg, Ng, Kg, batch):
            c = base.with_knob(K.CUDNN_KNOB_TYPE_WINO_TILE, m).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, t)
            c = c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, gc.swizzle_for(Mg, tiles[t].cfg, (1, 8)))
            if Engine.keep(eng, sub, c, None)[0] != S.CUDNN_STATUS_SUCCESS:
                continue
            gcfg = gc.gemm_config(tiles, c)
            ok, _ = gc.keep_config(NONFUSED, gcfg, False, Mg, Ng, Kg, batch, True, "float32")
            if not ok or 4 * sum(sizes) >= 1 << 40:
                continue
            cost = gc.cost(dev, tiles[t], gcfg, Mg, Ng, Kg, batch, 4, 4, 0, False) + _transform_time(dev, p, m)
            out.append((c, cost))
    return out


def _fused(eng, sub, p, dev):
    base = eng.default_config(sub)
    idx = range(len(FUSED_TILES))
    T = _sizes(p, 2)[0]
    if simulator_enabled() and p.K * T <= gc.SIM_SMALL_OUTPUT:
        idx = [len(FUSED_TILES) - 1]
    out = []
    for i in idx:
        c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, i)
        _, fc, tflops, regs = FUSED_TILES[i]
        if not fused_check(fc)[0] or fc.threads * regs > 65536:
            continue
        flops = 2.0 * 16 * p.K * T * p.C
        blocks = gc.ceil_div(T, fc.BT) * gc.ceil_div(p.K, fc.BK)
        nbytes = (p.N * p.C * p.H * p.W * p.in_bytes * 2 + 16 * p.K * p.C * 4 * gc.ceil_div(T, fc.BT)
                  / max(1, min(blocks, dev.sm_count)) + p.N * p.K * p.P * p.Q * p.out_bytes + p.extra_bytes)
        eff = tflops * 1e12 / dev.peak("fp32")
        main = heuristics.kernel_time(dev, flops=flops / eff, nbytes=nbytes, blocks=blocks, threads=fc.threads,
                                      regs=regs, smem=fc.smem_bytes(), tile=(fc.BK, fc.BT), problem=(p.K, T))
        filt = heuristics.kernel_time(dev, nbytes=p.K * p.C * 9 * 4 + 16 * p.K * p.C * 4, blocks=wk.blocks(p.K * p.C))
        out.append((c, main + filt))
    return out


def reference(g, dev):
    """The Winograd entries of a mode-A ranking, [(engine, knobs, cost)] best first, from scratch: per
    engine its valid configs sorted by cost (stable), then (demoted, cost, engine index, position)."""
    rows = []
    for name, fn in ((NONFUSED, _nonfused), (FUSED, _fused)):
        eng = registry.by_name(name)
        sub = api.problem(g)
        try:
            p = cw.WinoProblem(sub)      # a fresh problem object: nothing remembered
        except gc.Reject:
            continue
        if name == FUSED and p.G != 1:
            continue
        cands = sorted(fn(eng, sub, p, dev), key=lambda r: r[1])[:64]
        late = bool(heuristics.demotion(eng, sub))
        rows += [(late, cost, eng.global_index, i, name, cfg.knobs) for i, (cfg, cost) in enumerate(cands)]
    rows.sort(key=lambda r: r[:4])
    return [(r[4], r[5], r[1]) for r in rows]


def ranked(g, ctx):
    return [(e.name, e.config.knobs, e.predicted_time)
            for e in rank_subgraph(api.problem(g), HM.CUDNN_HEUR_MODE_A, ctx) if e.name in (NONFUSED, FUSED)]


def draw(rng):
    return (str(rng.choice(["fprop", "dgrad"])), int(rng.choice([1, 2, 3, 8, 17, 32, 64, 128])),
            int(rng.choice([16, 24, 48, 64, 96, 128, 256, 512])), int(rng.choice([7, 8, 13, 14, 28, 56, 112, 224])),
            int(rng.choice([16, 32, 48, 64, 128, 256, 512])), bool(rng.integers(2)),
            str(rng.choice(list(DTYPES))), bool(rng.integers(2)))


FIXED = [("fprop", 32, 64, 56, 64, True, "f32", True), ("fprop", 32, 512, 7, 512, False, "f32", True),
         ("dgrad", 1, 16, 7, 16, False, "f16", False), ("fprop", 128, 512, 224, 512, True, "bf16", True),
         ("dgrad", 128, 256, 14, 256, True, "bf16", False), ("fprop", 1, 16, 7, 16, False, "f32", True)]


def _check_same(prob, ctx):
    g = graph(*prob)
    got, want = ranked(g, ctx), reference(g, ctx.device)
    assert want, f"{prob}: the reference ranks no Winograd config"
    assert got == want, f"{prob}:\n  got  {got[:4]}\n  want {want[:4]}"
    sub = api.problem(g)
    for name, knobs, _ in got:           # the workspace of every ranked config: exactly U + V + M
        eng = registry.by_name(name)
        cfg = next(e.config for e in rank_subgraph(sub, HM.CUDNN_HEUR_MODE_A, ctx) if e.config.knobs == knobs
                   and e.name == name)
        p = cw.WinoProblem(sub)
        ws = 4 * sum(_sizes(p, cfg.get(K.CUDNN_KNOB_TYPE_WINO_TILE))[2]) if name == NONFUSED else 16 * p.K * p.C * 4
        assert eng.workspace_size(sub, cfg) == ws
        tile4 = name == NONFUSED and cfg.get(K.CUDNN_KNOB_TYPE_WINO_TILE) == 4
        assert (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 in eng.config_notes(sub, cfg)) == tile4
        assert NN.CUDNN_NUMERICAL_NOTE_WINOGRAD in eng.config_notes(sub, cfg)


@pytest.mark.parametrize("prob", FIXED, ids=lambda p: "-".join(map(str, p)))
def test_ranking_matches_the_straightforward_computation(prob):
    _check_same(prob, api.context())


def test_ranking_matches_on_random_problems(rng):
    ctx = api.context()
    for _ in range(10):
        _check_same(draw(rng), ctx)


def test_ranking_matches_on_another_device():
    """An 8-SM variant of the device is another memo key: its own costs, still the reference's."""
    from dataclasses import replace

    ctx = api.context()
    small = replace(ctx, device=replace(device.current(), sm_count=8))
    prob = ("fprop", 8, 64, 28, 64, True, "f32", True)
    g = graph(*prob)
    big = ranked(g, ctx)
    assert ranked(g, small) == reference(g, small.device) != big
    assert big == reference(g, ctx.device)


def test_support_is_decided_without_costing(monkeypatch):
    calls = []
    for name in (NONFUSED, FUSED):
        cls = type(registry.by_name(name))
        real = cls._cost
        monkeypatch.setattr(cls, "_cost", lambda self, *a, _real=real: calls.append(self.name) or _real(self, *a))
    g = graph("fprop", 5, 64, 20, 96)
    ctx = api.context()
    for name in (NONFUSED, FUSED):
        assert registry.by_name(name).check_support(api.problem(g), ctx) == (S.CUDNN_STATUS_SUCCESS, "")
    assert calls == []
    assert ranked(g, ctx) == reference(g, ctx.device)
    assert sorted(set(calls)) == [FUSED, NONFUSED]


def test_no_valid_config_is_refused_with_a_reason():
    """4100 groups: alpha^2 x G batched GEMMs exceed the grid's z limit for both tile sizes."""
    g = graph("fprop", 1, 4100, 4, 4100, nhwc=False, epilogue=False, groups=4100)
    eng, sub, ctx = registry.by_name(NONFUSED), api.problem(g), api.context()
    p = cw.WinoProblem(sub)
    assert all(_sizes(p, m)[3][3] > gc.MAX_GRID_YZ for m in (2, 4))
    st, why = eng.check_support(sub, ctx)
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE and "no valid configuration" in why
    assert eng.candidates(sub, ctx) == ()
    # one group fewer than the m=2 limit: F(2x2) fits, F(4x4) does not
    g = graph("fprop", 1, 4000, 4, 4000, nhwc=False, epilogue=False, groups=4000)
    sub = api.problem(g)
    assert eng.check_support(sub, ctx) == (S.CUDNN_STATUS_SUCCESS, "")
    tiles = {c.get(K.CUDNN_KNOB_TYPE_WINO_TILE) for c in eng.candidates(sub, ctx)}
    assert tiles == {2}
    assert ranked(g, ctx) == reference(g, ctx.device)


def test_transform_cost_is_per_problem_device_and_tile():
    ctx = api.context()
    from dataclasses import replace

    p = cw.WinoProblem(api.problem(graph("fprop", 4, 64, 30, 64)))
    dev, small = ctx.device, replace(ctx.device, sm_count=8)
    for d in (dev, small, dev):
        for m in (2, 4, 2):
            assert cw.transform_time(d, p, m) == _transform_time(d, p, m)
    assert cw.transform_time(dev, p, 2) != cw.transform_time(dev, p, 4)
