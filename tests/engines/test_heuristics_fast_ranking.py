"""The fast ranking path against a plain one: the cost model written out in gemm_time equals the
kernel_time composition it replaces; rankings from the per-signature memo, the kind pre-filter and the
per-knob memos equal a ranking recomputed from scratch; the signature memo is bounded and keyed by
problem, not by graph object."""
import dataclasses
import math
import time

import numpy as np
import pytest

from ncudnn.engines import api, device, heuristics as H, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import ConvFprop, Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnDataType_t as DT, cudnnPointwiseMode_t as PM

F32 = DT.CUDNN_DATA_FLOAT


def _t(uid, dims, nhwc=False, virtual=False):
    if virtual:
        return TensorDesc(uid, is_virtual=True)
    st = packed_strides(dims)
    if nhwc and len(dims) == 4:
        n, c, h, w = dims
        st = (h * w * c, 1, w * c, c)
    return TensorDesc(uid, tuple(dims), st, F32)


def conv_graph(n, c, h, k, r=3, stride=1, nhwc=True, epilogue=True):
    pad = r // 2
    p = (h + 2 * pad - r) // stride + 1
    x, w, y = _t(1, (n, c, h, h), nhwc), _t(2, (k, c, r, r), nhwc), _t(4, (n, k, p, p), nhwc)
    if not epilogue:
        return OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, spatial_dims=2, stride=(stride, stride),
                                  pre_padding=(pad, pad), post_padding=(pad, pad), dilation=(1, 1))]).finalize()
    v1, v2, b = _t(10, None, virtual=True), _t(11, None, virtual=True), _t(3, (1, k, 1, 1), nhwc)
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": v1}, spatial_dims=2, stride=(stride, stride),
                     pre_padding=(pad, pad), post_padding=(pad, pad), dilation=(1, 1))
    return OpGraph([conv, Pointwise("bias", {"X": v1, "B": b}, {"Y": v2}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": v2}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]).finalize()


def matmul_graph(m, n, k, batch=1):
    a, b, c = _t(1, (batch, m, k)), _t(2, (batch, k, n)), _t(3, (batch, m, n))
    return OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})]).finalize()


# ------------------------------------------------------------------------------ the cost model

def _gemm_time_reference(device, m, n, k, batch=1, tile=(128, 128), threads=256, regs=64, smem=0, in_bytes=4,
                         out_bytes=4, peak="fp32", split_k=1, extra_bytes=0, compute_eff=1.0):
    """gemm_time as composed from kernel_time before it was written out (the model's definition)."""
    tm, tn = tile
    tiles_m, tiles_n = math.ceil(m / tm), math.ceil(n / tn)
    split_k = max(1, int(split_k))
    blocks = tiles_m * tiles_n * batch * split_k
    flops = 2.0 * m * n * k * batch / max(compute_eff, 1e-6)
    a_bytes, b_bytes = m * k * batch * in_bytes, k * n * batch * in_bytes
    unique = a_bytes + b_bytes
    streamed = tiles_n * a_bytes + tiles_m * b_bytes
    if unique > device.l2_bytes / 2:
        wave = max(device.sm_count * H._blocks_per_sm(device, threads, regs, smem), 1)
        unique = max(unique, streamed / math.sqrt(wave))
    dram = unique + m * n * batch * out_bytes + extra_bytes
    if split_k > 1:
        dram += 2 * split_k * m * n * batch * 4
    return H.kernel_time(device, flops=flops, nbytes=dram, peak=peak, blocks=blocks, threads=threads, regs=regs,
                         smem=smem, tile=tile, problem=(m, n), launches=1 + (split_k > 1),
                         per_sm=H._blocks_per_sm(device, threads, regs, smem))


def test_gemm_time_equals_the_kernel_time_composition(rng):
    d = device.H200
    for _ in range(400):
        m, n, k = (int(v) for v in rng.integers(1, 1 << 14, 3))
        kw = dict(batch=int(rng.integers(1, 9)), tile=(int(rng.choice([16, 32, 64, 128])), int(rng.choice([16, 64, 128]))),
                  threads=int(rng.choice([64, 128, 256, 512])), regs=int(rng.choice([40, 96, 167, 255])),
                  smem=int(rng.choice([0, 16384, 65536, 200000])), in_bytes=int(rng.choice([2, 4])),
                  split_k=int(rng.choice([1, 4, 16])), extra_bytes=int(rng.integers(0, 1 << 20)),
                  compute_eff=float(rng.uniform(0.05, 1.0)), peak=str(rng.choice(["fp32", "bf16", "fp64"])))
        want = _gemm_time_reference(d, m, n, k, **kw)
        got = H.gemm_time(d, m, n, k, **kw)
        assert got == want or math.isclose(got, want, rel_tol=1e-12), (m, n, k, kw, got, want)


def test_blocks_per_sm_memo_matches_the_formula(rng):
    d = device.H200
    for _ in range(200):
        args = (int(rng.integers(1, 1025)), int(rng.integers(1, 256)), int(rng.choice([0, 1, 4096, 50000, 250000])))
        assert H.blocks_per_sm(d, *args) == H._blocks_per_sm(d, *args)
    small = dataclasses.replace(device.H200, regs_per_sm=32768)
    assert H.blocks_per_sm(d, 256, 64) == 4
    assert H.blocks_per_sm(small, 256, 64) == H._blocks_per_sm(small, 256, 64, 0) == 2  # another SM: another entry


# ------------------------------------------------------------------------------ rankings

def _reference_ranking(graph, ctx):
    """Rank ``graph`` from scratch: every engine's check_support (no kind pre-filter, no memo), its
    candidates, each config costed by the engine's formula (a tiled GEMM engine's without its memos)."""
    sub = api.problem(graph)
    dev = ctx.device
    rows = []
    for eng in registry.engines():
        if eng.name == "composite" or eng.check_support(sub, ctx)[0] != 0:
            continue
        late = bool(H.demotion(eng, sub))
        for i, cfg in enumerate(eng.candidates(sub, ctx)):
            if hasattr(eng, "tiled"):    # the engines over the SIMT tiled-GEMM machinery (gemm.tiled)
                p = eng.problem(sub)
                M, N, K_, B = eng.gemm_shape(p)
                tile = eng.TILES[cfg.get(2, 0)]
                t = gc.cost(dev, tile, gc.gemm_config(eng.TILES, cfg), M, N, K_, B, p.in_bytes, p.out_bytes,
                            p.extra_bytes, p.fp64, eng.efficiency(p)) + gc.tail_time(sub, p.epi.out)
            else:
                t = float(eng.cost(sub, cfg, dev))
            if math.isfinite(t):
                rows.append((late, t, eng.global_index, i, cfg))
    rows.sort(key=lambda r: r[:4])
    return [(r[4], r[1]) for r in rows]


PROBLEMS = [
    ("resnet_3x3_c64", lambda: conv_graph(32, 64, 56, 64)),
    ("resnet_3x3_c256", lambda: conv_graph(32, 256, 14, 256)),
    ("resnet_1x1", lambda: conv_graph(32, 64, 56, 256, r=1)),
    ("resnet_3x3_s2", lambda: conv_graph(32, 128, 56, 128, stride=2)),
    ("small_channels", lambda: conv_graph(16, 16, 64, 16)),
    ("conv_nchw_plain", lambda: conv_graph(8, 96, 28, 80, nhwc=False, epilogue=False)),
    ("matmul_4096", lambda: matmul_graph(4096, 4096, 4096)),
    ("matmul_skinny", lambda: matmul_graph(8192, 64, 1024, batch=4)),
    ("matmul_small_long_k", lambda: matmul_graph(128, 256, 1 << 16)),
]


@pytest.mark.parametrize("make", [m for _, m in PROBLEMS], ids=[n for n, _ in PROBLEMS])
def test_fast_ranking_equals_a_ranking_from_scratch(make):
    ctx = api.context(None)
    fast = api.get_heuristics(make(), HM.CUDNN_HEUR_MODE_A)
    again = api.get_heuristics(make(), HM.CUDNN_HEUR_MODE_A)  # another graph object: the signature memo
    ref = _reference_ranking(make(), ctx)
    n = len(fast) - sum(ec.engine.name == "composite" for ec in fast)  # the unfused fallback plan comes last
    assert all(ec.engine.name == "composite" for ec in list(fast[n:]) + list(again[n:]))
    assert [(ec.config, ec.predicted_time) for ec in fast[:n]] == ref
    assert [ec.config for ec in again[:n]] == [c for c, _ in ref]
    assert len(ref) >= 2


def test_signature_memo_is_by_problem_not_by_object(monkeypatch):
    g1, g2 = matmul_graph(200, 136, 72), matmul_graph(200, 136, 72)
    first = api.get_heuristics(g1, HM.CUDNN_HEUR_MODE_A)

    def boom(*a, **k):
        raise AssertionError("ranked again")
    monkeypatch.setattr(api, "rank_subgraph", boom)
    assert api.get_heuristics(g2, HM.CUDNN_HEUR_MODE_A) == first  # answered from the memo
    assert api.problem_signature(g1) == api.problem_signature(g2)
    other = matmul_graph(200, 136, 80)
    assert api.problem_signature(other) != api.problem_signature(g1)
    with pytest.raises(AssertionError, match="ranked again"):
        api.get_heuristics(other, HM.CUDNN_HEUR_MODE_A)  # a new shape is ranked


def test_signature_includes_strides_and_attributes():
    assert api.problem_signature(conv_graph(2, 8, 8, 8, nhwc=True)) != api.problem_signature(conv_graph(2, 8, 8, 8, nhwc=False))
    assert api.problem_signature(conv_graph(2, 8, 9, 8, stride=1)) != api.problem_signature(conv_graph(2, 8, 9, 8, stride=2))


def test_lru_is_bounded():
    lru = api._LRU(3)
    for i in range(5):
        lru.put(i, str(i))
    assert lru.get(0) is None and lru.get(1) is None and lru.get(4) == "4"
    lru.get(2)           # recently used: kept
    lru.put(5, "5")
    assert lru.get(3) is None and lru.get(2) == "2" and len(lru.d) == 3


def test_repeated_ranking_is_fast():
    make = lambda: conv_graph(32, 128, 28, 128)  # noqa: E731
    api.get_heuristics(make(), HM.CUDNN_HEUR_MODE_A)
    times = []
    for _ in range(9):
        g = make()
        t0 = time.perf_counter()
        api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
        times.append(time.perf_counter() - t0)
    # ~0.05 ms on an idle host; generous for a loaded CI machine
    assert np.median(times) < 1e-3, f"median {np.median(times) * 1e6:.0f} us"


def _kernel_time_reference(device, flops=0.0, nbytes=0.0, peak="fp32", blocks=None, threads=256, regs=32, smem=0,
                           tile=None, problem=None, launches=1):
    """kernel_time as the product of the helper factors (its definition)."""
    per_sm = H._blocks_per_sm(device, threads, regs, smem)
    if per_sm == 0:
        return math.inf
    eff = H.occupancy_factor(per_sm, threads)
    if blocks is not None:
        eff *= H.wave_efficiency(blocks, device, per_sm)
    if tile is not None and problem is not None:
        eff *= H.tile_efficiency(problem[0], problem[1], tile[0], tile[1])
    compute = flops / (device.peak(peak) * max(eff, 1e-6)) if flops else 0.0
    memory = nbytes / device.mem_bandwidth if nbytes else 0.0
    return launches * H.LAUNCH_OVERHEAD + max(compute, memory)


def test_kernel_time_equals_the_product_of_its_factors(rng):
    d = device.H200
    for _ in range(400):
        kw = dict(flops=float(rng.choice([0.0, float(rng.uniform(1e3, 1e13))])),
                  nbytes=float(rng.choice([0.0, float(rng.uniform(1e3, 1e11))])),
                  blocks=None if rng.uniform() < 0.2 else int(rng.integers(0, 100000)),
                  threads=int(rng.choice([32, 96, 128, 256, 1024])), regs=int(rng.choice([32, 64, 128, 255])),
                  smem=int(rng.choice([0, 8192, 100000])), launches=int(rng.integers(1, 4)))
        if rng.uniform() < 0.7:
            kw["tile"] = (int(rng.choice([8, 32, 128])), int(rng.choice([16, 64, 128])))
            kw["problem"] = (int(rng.integers(0, 5000)), int(rng.integers(0, 5000)))
        want, got = _kernel_time_reference(d, **kw), H.kernel_time(d, **kw)
        assert got == want or math.isclose(got, want, rel_tol=1e-12), (kw, got, want)


def test_memo_notices_a_replaced_check_support(monkeypatch):
    from ncudnn.types import cudnnStatus_t as S

    make = lambda: matmul_graph(96, 40, 24)  # noqa: E731
    before = {ec.name for ec in api.get_heuristics(make(), HM.CUDNN_HEUR_MODE_A)}
    eng = registry.by_name("matmul_simt")
    assert "matmul_simt" in before
    monkeypatch.setattr(type(eng), "check_support", lambda self, sub, ctx: (S.CUDNN_STATUS_NOT_SUPPORTED, "test"))
    after = {ec.name for ec in api.get_heuristics(make(), HM.CUDNN_HEUR_MODE_A)}
    assert after == before - {"matmul_simt"}
