"""FP8 (e4m3 / e5m2) matmul through engine matmul_tc (simulator at tiny shapes, real shapes with
NCUDNN_SHAPES=gpu): IR graph matmul -> by-value descale_a * descale_b * scale_d (-> bias -> relu) -> FP8 /
BF16 output, heuristics -> plan -> execute vs the float64 oracle (then the output type's rounding),
poisoned outputs; refusals name the cause."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.device import H200
from ncudnn.engines.matmul.tc import FP8_SPILLS, TILES
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.testing import SIM, size
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnStatus_t as S
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.matmul.common import FP8_DTYPES, matmul_mapping
from ncudnn.engines.matmul.tc_fp8 import FP8, fp8_mapping

E4, E5 = DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E5M2
F32, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_BFLOAT16
NP = {E4: ml_dtypes.float8_e4m3fn, E5: ml_dtypes.float8_e5m2, BF16: ml_dtypes.bfloat16, F32: np.float32}
STORE = {E4: np.uint8, E5: np.uint8, BF16: np.uint16, F32: np.float32}
POISON = {E4: 0x7F, E5: 0x7F, BF16: 0x7FC0, F32: np.nan}     # NaN bits of each type
SIM_TILE = len(TILES) - 2          # 32x32x32 (halves) on 2x2 warps: the simulator's tile


def ctx(tc=True, **kw):
    return replace(api.context(), allow_tensor_cores=tc, **kw)


def tensor(uid, dims, dtype, strides=None):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype, name=f"t{uid}")


def scalar(uid, v):
    return TensorDesc(uid, (1, 1, 1), (1, 1, 1), F32, is_by_value=True, value=np.float32(v), name=f"s{uid}")


def fp8_graph(bsz, m, n, k, in_dt, out_dt, scales=(0.5, 0.25, 2.0), bias_relu=False, a_dt=None, a_strides=None,
              b_strides=None, device_scales=0):
    """matmul(A, B stored (n, k)) * descale_a * descale_b * scale_d [+ bias, relu] -> out; the first
    ``device_scales`` scales are one-element FP32 device tensors (uids 5, 6, ...), the rest by value."""
    a = tensor(1, (bsz, m, k), a_dt or in_dt, a_strides)
    b = tensor(2, (bsz, k, n), in_dt, b_strides or (n * k, 1, k))
    out = tensor(4, (bsz, m, n), out_dt)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": TensorDesc(10, is_virtual=True)}, compute_dtype=F32)
    nodes, cur = [mm], mm.outputs["C"]
    steps = [("descale_a", scales[0]), ("descale_b", scales[1]), ("scale_d", scales[2])]
    tensors = {"A": a, "B": b, "out": out}
    for i, (name, v) in enumerate(steps):
        last = i == len(steps) - 1 and not bias_relu
        nxt = out if last else TensorDesc(11 + i, is_virtual=True)
        st = tensor(5 + i, (1, 1, 1), F32) if i < device_scales else scalar(5 + i, v)
        if i < device_scales:
            tensors[f"scale{i}"] = st
        nodes.append(Pointwise(name, {"X": cur, "B": st}, {"Y": nxt}, mode=PM.CUDNN_POINTWISE_MUL))
        cur = nxt
    if bias_relu:
        bias = tensor(3, (1, 1, n), F32)
        tensors["bias"] = bias
        add = Pointwise("bias", {"X": cur, "B": bias}, {"Y": TensorDesc(20, is_virtual=True)},
                        mode=PM.CUDNN_POINTWISE_ADD)
        nodes += [add, Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": out}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]
    return OpGraph(nodes).finalize(), tensors


def to_dev(x, t):
    """``x`` (host, any dtype) at tensor ``t``'s strides in a flat device buffer (gaps poisoned)."""
    st = STORE[t.dtype]
    buf = np.full(t.span_elements(), POISON[t.dtype], st)
    view = np.lib.stride_tricks.as_strided(buf, x.shape, [s * buf.itemsize for s in t.strides])
    view[...] = x.astype(NP[t.dtype]).view(st)
    return cuda.to_device(buf)


def read(buf, t):
    h = buf.copy_to_host()
    v = np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides])
    return np.ascontiguousarray(v).view(NP[t.dtype]).astype(np.float64)


def run(rng, g, ts, in_dt, scales, bias_relu=False, tile=None):
    eng = registry.by_name("matmul_tc")
    cx = ctx()
    sub = api.problem(g)
    assert eng.check_support(sub, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    cfg = eng.candidates(sub, cx)[0]
    tile = SIM_TILE if SIM and tile is None else tile
    if tile is not None:
        cfg = cfg.with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile).with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    plan = api.build_plan(g, cfg, cx)
    a, b, out = ts["A"], ts["B"], ts["out"]
    av = (rng.standard_normal(a.dims) * 2).astype(NP[a.dtype])
    bv = (rng.standard_normal(b.dims) * 2).astype(NP[in_dt])
    bufs = {1: to_dev(av, a), 2: to_dev(bv, b), 4: cuda.to_device(np.full(out.span_elements(), POISON[out.dtype],
                                                                            STORE[out.dtype]))}
    d = np.float64(scales[0]) * scales[1] * scales[2] * np.matmul(av.astype(np.float64), bv.astype(np.float64))
    for i in range(3):
        if f"scale{i}" in ts:
            bufs[5 + i] = cuda.to_device(np.full(1, scales[i], np.float32))
    if bias_relu:
        biasv = rng.uniform(-1, 1, ts["bias"].dims).astype(np.float32)
        bufs[3] = to_dev(biasv, ts["bias"])
        d = np.maximum(d + biasv, 0)
    api.execute(plan, bufs)
    got = read(bufs[4], out)
    ref = d.astype(NP[out.dtype]).astype(np.float64)             # the output type's rounding of the exact result
    assert np.isfinite(got).all()
    # one rounding step of the output type (the f32 accumulation order may round the other way)
    # one ulp, relative (up to 2^-mantissa bits) for normals; below the smallest normal, the subnormal spacing
    step, tiny = {E4: (2.0 ** -3, 2.0 ** -9), E5: (2.0 ** -2, 2.0 ** -16), BF16: (2.0 ** -7, 2.0 ** -133),
                  F32: (2.0 ** -20, 2.0 ** -149)}[out.dtype]
    bad = np.abs(got - ref) > np.maximum(step * np.abs(d), tiny) + 1e-6
    assert not bad.any(), f"{bad.sum()} of {bad.size} off; first at {np.argwhere(bad)[0]}: {got[bad][0]} vs {ref[bad][0]}"
    assert (got == ref).mean() > 0.97       # f32 sums of exact FP8 products rarely cross a rounding boundary
    return plan


@pytest.mark.parametrize("in_dt", [E4, E5], ids=["e4m3", "e5m2"])
def test_fp8_scales_fp8_out(rng, in_dt):
    bsz, m, n, k = size((1, 24, 40, 64), (2, 520, 392, 1024))
    scales = (0.5, 0.25, 2.0)
    g, ts = fp8_graph(bsz, m, n, k, in_dt, in_dt, scales)
    run(rng, g, ts, in_dt, scales)


@pytest.mark.parametrize("n_dev", [2, 3])
def test_fp8_device_tensor_scales(rng, n_dev):
    """descale_a, descale_b (and scale_d) as one-element FP32 device tensors: read by the kernel into alpha."""
    bsz, m, n, k = size((1, 16, 24, 32), (2, 520, 392, 1024))
    scales = (0.5, 0.25, 4.0)
    g, ts = fp8_graph(bsz, m, n, k, E4, E4, scales, device_scales=n_dev)
    p = registry.by_name("matmul_tc").problem(api.problem(g))
    assert [t.uid for t in p.dscales] == [5, 6, 7][:n_dev] and len(p.epi.alpha_scalars) == 3 - n_dev
    run(rng, g, ts, E4, scales)


def test_e4m3_bias_relu_bf16_out_batched(rng):
    bsz, m, n, k = size((2, 16, 24, 32), (3, 600, 264, 512))
    scales = (0.5, 0.5, 1.0)
    g, ts = fp8_graph(bsz, m, n, k, E4, BF16, scales, bias_relu=True)
    run(rng, g, ts, E4, scales, bias_relu=True)


def test_heuristics_pick_matmul_tc_with_tensor_core_note():
    g, _ = fp8_graph(1, 1024, 1024, 1024, E4, E4)
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A, ctx(device=H200))
    assert ecs and ecs[0].config.engine == "matmul_tc"
    eng = registry.by_name("matmul_tc")
    sub = api.problem(g)
    p = eng.problem(sub)
    assert p.dtypes[:3] == ("float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn") and p.in_bytes == 1
    assert eng.gemm_shape(p) == (1024, 1024, 512, 1)          # K in 16-bit halves
    assert len(p.epi.alpha_scalars) == 3                        # the three scales fold into alpha
    cands = eng.candidates(sub, ctx(device=H200))
    costs = [eng.cost(sub, c, H200) for c in cands]
    assert costs == sorted(costs) and 0 < costs[0] < 1e-3
    assert not {c.get(K.CUDNN_KNOB_TYPE_TILE_SIZE) for c in cands} & FP8_SPILLS
    bad = eng.default_config(sub)                              # TILE_SIZE 0 spills with FP8 operands
    assert "spills" in eng.keep(sub, bad, ctx())[1]


def test_refusals_name_the_cause():
    eng = registry.by_name("matmul_tc")

    def why(g, cx=None):
        return eng.check_support(api.problem(g), cx or ctx())

    st, r = why(fp8_graph(1, 32, 32, 64, E5, E4, a_dt=E4)[0])
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE and "float8_e5m2" in r and "both" in r
    st, r = why(fp8_graph(1, 32, 32, 64, E4, E4, a_strides=(32 * 64, 1, 32))[0])    # A m-contiguous
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "FP8 needs k-contiguous" in r
    st, r = why(fp8_graph(1, 32, 32, 40, E4, E4)[0])
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "K = 40" in r
    g = fp8_graph(1, 32, 32, 64, E4, E4)[0]
    st, r = why(g, ctx(tc=False))
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "tensor cores" in r
    st, r = why(g, ctx(device=replace(H200, cc=(8, 6))))
    assert st == S.CUDNN_STATUS_ARCH_MISMATCH and "sm_89" in r
    assert why(g, ctx(device=replace(H200, cc=(8, 9))))[0] == S.CUDNN_STATUS_SUCCESS
    # an FP8 output from 16-bit operands is not offered
    a, b = tensor(1, (1, 32, 64), BF16), tensor(2, (1, 64, 32), BF16)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": tensor(4, (1, 32, 32), E4)}, compute_dtype=F32)
    st, r = why(OpGraph([mm]).finalize())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE and "FP8 outputs need FP8 A and B" in r


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [i for i in range(len(TILES) - 2) if i not in FP8_SPILLS],
                         ids=lambda i: TILES[i].label.replace(" ", "_"))
def test_gpu_fp8_every_tile(rng, tile):
    scales = (0.5, 0.25, 2.0)
    g, ts = fp8_graph(2, 520, 392, 1024, E4, E4, scales)
    run(rng, g, ts, E4, scales, tile=tile)


# matmul_mapping(sub, fp8=True) / tc_fp8.fp8_mapping take FP8 A / B / output as they are (no kernels run)
E4, E5 = DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E5M2


F32, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_BFLOAT16


def _t(uid, dims, dt, strides=None):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dt, name=f"t{uid}")


def _graph(a_dt, b_dt, out_dt, device_scales=0, bias_relu=False, nsteps=3):
    bsz, m, n, k = 2, 8, 16, 32
    a, b, out = _t(1, (bsz, m, k), a_dt), _t(2, (bsz, k, n), b_dt, (n * k, 1, k)), _t(4, (bsz, m, n), out_dt)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": TensorDesc(10, is_virtual=True) if nsteps or bias_relu else out},
                compute_dtype=F32)
    nodes, cur = [mm], mm.outputs["C"]
    for i in range(nsteps):
        nxt = out if i == nsteps - 1 and not bias_relu else TensorDesc(11 + i, is_virtual=True)
        st = _t(5 + i, (1, 1, 1), F32) if i < device_scales else \
            TensorDesc(5 + i, (1, 1, 1), (1, 1, 1), F32, is_by_value=True, value=0.5, name=f"s{i}")
        nodes.append(Pointwise(f"scale{i}", {"X": cur, "B": st}, {"Y": nxt}, mode=PM.CUDNN_POINTWISE_MUL))
        cur = nxt
    if bias_relu:
        add = Pointwise("bias", {"X": cur, "B": _t(3, (1, 1, n), F32)}, {"Y": TensorDesc(20, is_virtual=True)},
                        mode=PM.CUDNN_POINTWISE_ADD)
        nodes += [add, Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": out}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]
    return api.problem(OpGraph(nodes).finalize())


@pytest.mark.parametrize("a_dt,b_dt,out_dt", [(E4, E4, E4), (E5, E4, BF16), (E4, E5, F32), (E5, E5, E5),
                                               (BF16, BF16, E4), (E4, E4, BF16)])
@pytest.mark.parametrize("shape", [dict(), dict(device_scales=2), dict(device_scales=3, bias_relu=True),
                                   dict(bias_relu=True), dict(nsteps=0)])
def test_fp8_mapping_keeps_the_graph_dtypes(a_dt, b_dt, out_dt, shape):
    # fp8_mapping maps FP8 tensors as they are (matmul_mapping(fp8=True)): dtypes, byte sizes, the graph's own
    # A / B / output tensors, leading device scales folded only after FP8 inputs
    sub = _graph(a_dt, b_dt, out_dt, **shape)
    try:
        p = fp8_mapping(sub)
    except gc.Reject:
        assert shape.get("device_scales") and (a_dt, b_dt) == (BF16, BF16)
        return
    out = next(iter((sub.epilogue[-1] if sub.epilogue else sub.anchor).outputs.values()))
    names = tuple(gc.kdtype(t) for t in (sub.anchor.inputs["A"], sub.anchor.inputs["B"], out))
    assert p is not None and p.dtypes[:3] == names
    assert (p.M, p.N, p.K, p.batch) == (8, 16, 32, (1, 2))
    assert p.A is sub.anchor.inputs["A"] and p.B is sub.anchor.inputs["B"] and p.epi.out.uid == out.uid
    assert p.in_bytes == (1 if names[0] in FP8 else 2) and p.out_bytes == gc.bytes_of(names[2])
    fp8_in = names[0] in FP8 or names[1] in FP8
    assert len(p.dscales) == (shape.get("device_scales", 0) if fp8_in else 0)
    assert all(t.dims and all(d == 1 for d in t.dims) for t in p.dscales)


def test_fp8_mapping_refused_without_the_flag():
    sub = _graph(E4, E4, BF16, nsteps=1)
    with pytest.raises(gc.Reject, match=r"node 'mm': A: data type .* is not one of"):
        matmul_mapping(sub)
    assert set(FP8_DTYPES) == set(FP8)
    assert fp8_mapping(_graph(BF16, BF16, F32)) is None
