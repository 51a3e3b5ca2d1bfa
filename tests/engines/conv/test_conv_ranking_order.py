"""Cold ranking of the implicit-GEMM conv engines (conv_implicit_gemm, conv_implicit_precomp): the
ranked (engine, knobs, predicted time) list, every config's keep verdict and reason, the workspace
and the support verdict are what the straightforward computation gives (a fresh ConvProblem, the
precomp table built, every config made with Config.with_knob, checked with gemm_common.keep_config
and costed with gemm_common.cost, ranked with gemm_common.rank_candidates, no memo), on conv
problems drawn fresh each run: fprop (+ bias + relu) / dgrad / wgrad, 1x1 / 3x3 / 7x7, stride 1 / 2,
NCHW / NHWC, FP32 / FP16 / BF16, N 1..128; and on an 8-SM variant of the device. conv_gemm_1x1's 1x1
wgrad: its route (one GEMM / per-image sum / pixels-last copies) worked out from the tensors and held equal
to its mapping, its space, keep, cost and exact workspace written out, candidates by cost alone (<= 24)."""
import math
from dataclasses import replace

import pytest

from conv_rank_graphs import FIXED, conv_graph, draw
from ncudnn.engines import api, device, heuristics, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.base import OK, Engine
from ncudnn.engines.conv.common import MAX_SPLIT, ConvProblem, table_fits_built
from ncudnn.engines.ranking import rank_subgraph
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K, cudnnStatus_t as S

ENGINES = ("conv_implicit_gemm", "conv_implicit_precomp", "conv_gemm_1x1")


def _splits(eng, tile, tiles, reduction, dev):
    c = tile.cfg
    slots = dev.sm_count * max(heuristics.blocks_per_sm(dev, c.num_threads, tile.regs, c.smem_bytes()), 1)
    feasible, s = [], 2
    while s <= MAX_SPLIT and reduction >= s * c.BLOCK_K * 8:
        feasible.append(s)
        s *= 2
    out = [s for s in feasible if slots // 2 <= tiles * s <= 8 * slots]
    if not out and feasible and tiles * feasible[-1] < slots // 2:
        out = feasible[-1:]
    return tuple(out)


def _space(eng, sub, p):
    """The configs offered, in order (made the long way)."""
    M, N, K_ = p.gemm
    G = p.g.G
    T = eng.TILES
    tiles = [t for t in gc.useful_tiles(T, M, N, K_, G) if math.ceil(M / T[t].cfg.BLOCK_M) <= gc.MAX_GRID_YZ]
    if not tiles:
        every = [t for t in range(len(T)) if math.ceil(M / T[t].cfg.BLOCK_M) <= gc.MAX_GRID_YZ]
        tiles = [t for t in every if T[t].cfg.BLOCK_N <= 2 * max(N, 16)] or every
    wgrad = p.kind == "wgrad"
    plan = []
    for t in tiles:
        n_tiles = math.ceil(M / T[t].cfg.BLOCK_M) * math.ceil(N / T[t].cfg.BLOCK_N)
        if not gc.split_worthwhile(M, N, n_tiles, G):
            plan.append((t, (1,)))
        elif wgrad:
            plan.append((t, _splits(eng, T[t], n_tiles * G, K_, device.current())))
        else:
            plan.append((t, (1, 4)))
    if wgrad and any(sp and sp != (1,) for _, sp in plan):
        plan = [(t, sp) for t, sp in plan if sp and sp != (1,)]
    strided_dgrad = eng.PHASED and p.kind == "dgrad" and any(v > 1 for v in p.g.stride)
    base, out = eng.default_config(sub), []
    for t, splits in plan:
        for s in splits or (1,):
            for buf in ((1, 0) if wgrad and s > 1 else (1,)):
                rows = math.ceil(M / T[t].cfg.BLOCK_M)
                c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, t).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s)
                c = c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, buf)
                out.append(c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 8 if rows > 8 else 1))
                if strided_dgrad and s == 1:
                    out.append(out[-1].with_knob(K.CUDNN_KNOB_TYPE_SPLIT_RS, 1))
    return out


def _keep(eng, sub, p, c):
    st = Engine.keep(eng, sub, c, None)
    if st[0] != S.CUDNN_STATUS_SUCCESS:
        return st
    for k in (K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_SWIZZLE):
        if not gc.is_pow2(c.get(k)):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{eng.name}: {k.name} = {c.get(k)} is not a power of 2"
    M, N, K_ = p.gemm
    ok, why = gc.keep_config(eng.name, gc.gemm_config(eng.TILES, c), p.fp64, M, N, K_, p.g.G, p.epi.linear,
                             p.epi.spec.out_dtype)
    if not ok:
        return S.CUDNN_STATUS_NOT_SUPPORTED, why
    if eng.PHASED and c.get(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0) == 1:
        if p.kind != "dgrad" or all(v == 1 for v in p.g.stride):
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{eng.name}: SPLIT_RS = 1 (per-phase GEMMs) is for the " \
                f"dgrad of a strided convolution, not {p.kind} with stride {p.g.stride}"
        if c.get(K.CUDNN_KNOB_TYPE_SPLIT_K, 1) != 1:
            return S.CUDNN_STATUS_NOT_SUPPORTED, f"{eng.name}: SPLIT_RS = 1 needs SPLIT_K = 1"
    return OK


def _cost(eng, p, c, dev):
    M, N, K_ = p.gemm
    t = gc.cost(dev, eng.TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)], gc.gemm_config(eng.TILES, c), M, N, K_, p.g.G,
                p.in_bytes, p.out_bytes, p.extra_bytes, p.fp64, eng.LOADER_EFF)
    if eng.PHASED and c.get(K.CUDNN_KNOB_TYPE_SPLIT_RS, 0) == 1 and math.isfinite(t):
        from ncudnn.kernels.conv.dgrad_phased import phases
        g = p.g
        ph = phases(g)
        useful = sum(len(taps) * math.prod(n) for _, n, taps, _ in ph)
        t = t * useful / max(g.taps * math.prod(g.DHW), 1) * 1.05 + 3e-6 * (len(ph) - 1)
    return t


def _reference_1x1(eng, sub, dev):
    """conv_gemm_1x1: GemmEngineBase's space (gemm.mapping) (configs made with Config.with_knob), gemm_common's checks
    and costs on the 1x1 mapping."""
    from ncudnn.engines.conv.gemm_1x1 import conv1x1_mapping
    from ncudnn.engines.gemm.mapping import GemmEngineBase

    def keep(c, p):
        st = Engine.keep(eng, sub, c, None)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
        for k in (K.CUDNN_KNOB_TYPE_SPLIT_K, K.CUDNN_KNOB_TYPE_SWIZZLE):
            if not gc.is_pow2(c.get(k)):
                return S.CUDNN_STATUS_NOT_SUPPORTED, f"{eng.name}: {k.name} = {c.get(k)} is not a power of 2"
        ok, why = gc.keep_config(eng.name, gc.gemm_config(eng.TILES, c), p.fp64, p.M, p.N, p.K, p.nb, p.epi.linear,
                                 p.epi.spec.out_dtype)
        return OK if ok else (S.CUDNN_STATUS_NOT_SUPPORTED, why)

    if sub.kind == "conv_wgrad":
        return _reference_wgrad_1x1(eng, sub, dev, keep)
    try:
        if sub.kind not in eng.kinds:
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, "kind")
        p = conv1x1_mapping(sub)
    except gc.Reject:
        return False, [], {}
    space = GemmEngineBase.make_space(eng, sub)

    def cost(c):
        return gc.cost(dev, eng.TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)], gc.gemm_config(eng.TILES, c), p.M, p.N,
                       p.K, p.nb, p.in_bytes, p.out_bytes, p.extra_bytes, p.fp64, 1.0)

    keeps = {c.knobs: keep(c, p) for c in space}
    good = [c for c in space if keeps[c.knobs][0] == S.CUDNN_STATUS_SUCCESS]
    if len(good) > 1:
        costs = {c: cost(c) for c in good}
        good = list(gc.rank_candidates(good, costs.__getitem__))
    return bool(good), [(c, cost(c)) for c in good[:64]], keeps


def _wgrad_route(sub):
    """(route, M, N, K, batch, fast_ok, k_fast) of a conv_wgrad as conv_gemm_1x1 maps it, worked out from
    the tensors: None when unsupported (filter not 1x1, padding, groups, a strided conv that cannot be
    copied). Routes: "one" (NHWC or one image: one GEMM over the pixels), "copy" (dy and x copied
    pixels-last first: strided, or NCHW with H*W % 8 != 0; fp32 with channels % 4 == 0), "sum"
    (per-image GEMMs summed through the workspace)."""
    node = sub.anchor
    x, dw, dy = node.conv_tensors()
    if any(d != 1 for d in dw.dims[2:]) or any(node.pre_padding) or any(node.post_padding) or node.groups != 1:
        return None
    n, c, k = x.dims[0], x.dims[1], dy.dims[1]
    pix = math.prod(dy.dims[2:])
    fp32 = gc.kdtype(x) == "float32" and gc.kdtype(dy) == "float32"
    copyable = fp32 and c % 4 == 0 and k % 4 == 0
    nhwc = dy.strides[1] == 1 and x.strides[1] == 1
    if any(v != 1 for v in node.stride):
        if not copyable:
            return None
        route = "copy"
    elif nhwc or n == 1:
        route = "one"
    elif pix % 8 and copyable:
        route = "copy"
    else:
        route = "sum"
    red, nb = (pix, n) if route == "sum" else (n * pix, 1)
    if route == "copy" or (route == "one" and nhwc):     # both operands contiguous along K / C
        fast, k_fast = fp32 and red % 8 == 0 and c % 4 == 0 and k % 4 == 0, False
    else:                                                 # NCHW: contiguous along the pixels
        fast, k_fast = fp32 and red % 8 == 0 and pix % 4 == 0, True
    return route, k, c, red, nb, fast, k_fast


def _wgrad_workspace(sub, c):
    """conv_gemm_1x1's exact wgrad workspace: the partials of every (image, slice) when summing images or
    splitting K, plus the two pixels-last copies (each rounded up to 256 bytes)."""
    route, M, N, red, nb, _, _ = _wgrad_route(sub)
    split = c.get(K.CUDNN_KNOB_TYPE_SPLIT_K)
    ws = nb * split * M * N * 4 if route == "sum" or split > 1 else 0
    if route == "copy":
        ws += -(-red * M * 4 // 256) * 256 + -(-red * N * 4 // 256) * 256
    return ws


def _reference_wgrad_1x1(eng, sub, dev, keep_of):
    """conv_gemm_1x1 on a 1x1 conv_wgrad: the fast tiles that are useful (or the last one), SPLIT_K 1 plus the
    powers of 2 giving half a wave to 8 waves of resident blocks (slices of >= 8 k-tiles; else the two
    longest when even the longest leaves SMs idle), one tile unsplit under the simulator for tiny problems;
    costed as gemm_common.cost with the route's corrections; cheapest first (stable), at most 24."""
    from ncudnn.engines.conv import gemm_1x1 as m
    from ncudnn.platform import simulator_enabled

    want = _wgrad_route(sub)
    try:
        p = m.wgrad1x1_mapping(sub)
    except gc.Reject:
        assert want is None, want
        return False, [], {}
    assert want is not None
    route, M, N, red, nb, fast_ok, k_fast = want
    assert (p.M, p.N, p.K, p.nb, p.fast_ok) == (M, N, red, nb, fast_ok), (want, p)
    assert p.sum_batch == (route == "sum") and (p.pixels_last is not None) == (route == "copy"), route
    T = m.WGRAD_TILES
    small = simulator_enabled() and M * N * red * nb <= m.SIM_SMALL_MACS
    useful = [i for i, t in enumerate(T) if t.cfg.BLOCK_M <= 2 * max(M, 16) and t.cfg.BLOCK_N <= 2 * max(N, 16)]
    useful = useful or [len(T) - 1]
    base, space = eng.default_config(sub), []
    for i in (useful[-1:] if small else useful):
        g = T[i].cfg
        tiles = math.ceil(M / g.BLOCK_M) * math.ceil(N / g.BLOCK_N) * nb
        regs = math.ceil(T[i].regs / 8) * 8
        slots = 132 * max(1, min(2048 // g.num_threads, 65536 // (regs * g.num_threads)))
        feasible = [] if small else [2 ** e for e in range(1, 11) if red >= 2 ** e * g.BLOCK_K * 8]
        splits = [s for s in feasible if slots // 2 <= tiles * s <= 8 * slots]
        if not splits and feasible and tiles * feasible[-1] < slots // 2:
            splits = feasible[-2:]
        for s in [1] + splits:
            c = base.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, m.FIRST_WGRAD_TILE + i)
            c = c.with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K, s).with_knob(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF, 1)
            space.append(c.with_knob(K.CUDNN_KNOB_TYPE_SWIZZLE, 8 if math.ceil(M / g.BLOCK_M) > 8 else 1))

    def cost(c):
        tile = eng.TILES[c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)]
        g = gc.gemm_config(eng.TILES, c)
        t = gc.cost(dev, tile, g, M, N, red, nb, p.in_bytes, p.out_bytes, p.extra_bytes, p.fp64, 1.0)
        if math.isinf(t):
            return t
        if g.MAINLOOP == "fast":
            if not fast_ok and p.in_bytes == 4 and not p.fp64:     # fp32, misaligned: the generic mainloop
                t *= (tile.tflops or tile.estimate) / gc.GENERIC_BK8_TFLOPS
            elif fast_ok and k_fast:
                t /= m.KFAST_EFF
        if route == "copy":
            t += 2 * red * (M + N) * 4 / dev.mem_bandwidth + 2 * heuristics.LAUNCH_OVERHEAD
        if route == "sum":
            t += (2 * nb * M * N * 4 if g.SPLIT_K == 1 else 0) / dev.mem_bandwidth
            t += 0 if g.SPLIT_K > 1 else heuristics.LAUNCH_OVERHEAD
        return t

    keeps = {}
    for c in space:
        st = keep_of(c, p)
        if st[0] == S.CUDNN_STATUS_SUCCESS and route == "sum" and c.get(K.CUDNN_KNOB_TYPE_SPLIT_K) > 1 and \
                c.get(K.CUDNN_KNOB_TYPE_SPLIT_K_BUF) == 0:
            st = S.CUDNN_STATUS_NOT_SUPPORTED, "atomic"
        keeps[c.knobs] = st
    good = [c for c in space if keeps[c.knobs][0] == S.CUDNN_STATUS_SUCCESS]
    costs = [cost(c) for c in good]
    order = sorted(range(len(good)), key=lambda i: costs[i])
    return bool(good), [(good[i], costs[i]) for i in order[:24]], keeps


def _workspace(name, sub, c):
    """The exact workspace of ``c`` (bytes, before rounding)."""
    if name == "conv_gemm_1x1" and sub.kind == "conv_wgrad":
        return _wgrad_workspace(sub, c)
    M, N, B, fp64 = _gemm_dims(name, sub)
    return gc.split_workspace(gc.gemm_config(registry.by_name(name).TILES, c), M, N, B, fp64)


def _gemm_dims(name, sub):
    """(M, N, batch, fp64) of the GEMM an engine runs."""
    if name == "conv_gemm_1x1":
        from ncudnn.engines.conv.gemm_1x1 import conv1x1_mapping
        p = conv1x1_mapping(sub)
        return p.M, p.N, p.nb, p.fp64
    p = ConvProblem(sub)
    return p.gemm[0], p.gemm[1], p.g.G, p.fp64


def reference(sub, dev):
    """{engine: (supported, [(config, cost)] ranked, {knobs: keep})} computed from scratch."""
    out = {}
    for name in ENGINES:
        eng = registry.by_name(name)
        if name == "conv_gemm_1x1":
            out[name] = _reference_1x1(eng, sub, dev)
            continue
        try:
            p = ConvProblem(sub)
        except gc.Reject:
            out[name] = (False, [], {})
            continue
        if eng.PRECOMP and not table_fits_built(p)[0]:
            out[name] = (False, [], {})
            continue
        space = _space(eng, sub, p)
        keeps = {c.knobs: _keep(eng, sub, p, c) for c in space}
        good = [c for c in space if keeps[c.knobs][0] == S.CUDNN_STATUS_SUCCESS]
        if len(good) > 1:
            costs = {c: _cost(eng, p, c, dev) for c in good}
            good = list(gc.rank_candidates(good, costs.__getitem__))
        out[name] = (bool(good), [(c, _cost(eng, p, c, dev)) for c in good[:64]], keeps)
    return out


def _check(prob, ctx):
    g = conv_graph(*prob)
    sub = api.problem(g)
    ref = reference(sub, ctx.device)
    got = [(e.name, e.config.knobs, e.predicted_time, e.workspace_size) for e in
           rank_subgraph(sub, HM.CUDNN_HEUR_MODE_A, ctx) if e.name in ENGINES]
    rows = []
    for name in ENGINES:
        eng = registry.by_name(name)
        sup, ranked, keeps = ref[name]
        assert (eng.check_support(sub, ctx)[0] == S.CUDNN_STATUS_SUCCESS) == sup, (prob, name)
        if not sup:
            continue
        assert [c.knobs for c in eng.tiled.space(sub)] == list(keeps), (prob, name)
        for c in eng.tiled.space(sub):
            assert eng.keep(sub, c, ctx) == keeps[c.knobs], (prob, name, c)
        rows += [(t, eng.global_index, i, name, c) for i, (c, t) in enumerate(ranked) if math.isfinite(t)]
    rows.sort(key=lambda r: r[:3])
    from ncudnn.engines.ranking import _round_up
    want = []
    for t, _, _, name, c in rows:
        ws = _workspace(name, sub, c)
        want.append((name, c.knobs, t, _round_up(ws) if ws else 0))
    assert got == want, f"{prob}:\n  got  {got[:3]}\n  want {want[:3]}"
    return len(want)


@pytest.mark.parametrize("prob", FIXED, ids=lambda p: "-".join(map(str, p)))
def test_ranking_matches_the_straightforward_computation(prob):
    assert _check(prob, api.context()) > 0


def test_ranking_matches_on_random_problems(rng):
    ctx = api.context()
    n = 0
    for _ in range(40):
        try:
            prob = draw(rng)
            conv_graph(*prob)
        except Exception:
            continue
        n += _check(prob, ctx) > 0
    assert n >= 20


def test_ranking_matches_on_another_device():
    """An 8-SM variant of the device is another memo key: its own costs, still the reference's."""
    ctx = api.context()
    small = replace(ctx, device=replace(device.current(), sm_count=8))
    prob = ("fprop", 8, 64, 28, 64, 3, 1, True, "f32", True)
    assert _check(prob, small) > 0
    assert _check(prob, ctx) > 0
