"""GEMM-family matmul engines end to end (simulator, tiny shapes): IR graph -> heuristics -> plan ->
execute on device arrays, against the float64 oracle (ncudnn.reference.matmul) with poisoned outputs."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn.engines import api, registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.reference.pointwise import pointwise as rpw
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnBackendKnobType_t as K
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT
from ncudnn.types import cudnnPointwiseMode_t as PM, cudnnStatus_t as S

F32, F16, BF16, F64 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_DOUBLE
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16, F64: np.float64}
TOL = {F32: "float32", F16: "float16", BF16: "bfloat16", F64: "float64"}
TINY = len(gc.SMALL_TILES) - 1          # 8x8x4, 16 threads: fast in the simulator


def tensor(uid, dims, dtype=F32, strides=None, **kw):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype,
                      name=f"t{uid}", **kw)


def virt(uid):
    return TensorDesc(uid, is_virtual=True, name=f"v{uid}")


def dev(a, t):
    """Host array ``a`` at tensor ``t``'s strides (any, stride-0 dims excluded) in a flat device buffer."""
    buf = np.full(t.span_elements(), poison_value(np.float32), a.dtype) if a.dtype != ml_dtypes.bfloat16 else \
        np.zeros(t.span_elements(), a.dtype)
    view = np.lib.stride_tricks.as_strided(buf, a.shape, [s * a.itemsize for s in t.strides])
    view[...] = a
    return cuda.to_device(buf.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else buf)


def out_buf(t):
    dt = NP[t.dtype]
    if dt is ml_dtypes.bfloat16:
        return cuda.to_device(np.full(t.span_elements(), 0x7FC0, np.uint16))  # bf16 NaN bits
    return cuda.to_device(np.full(t.span_elements(), poison_value(dt), dt))


def read(buf, t):
    h = buf.copy_to_host()
    if NP[t.dtype] is ml_dtypes.bfloat16:
        h = h.view(ml_dtypes.bfloat16)
    return np.lib.stride_tricks.as_strided(h, t.dims, [s * h.itemsize for s in t.strides]).copy()


def rand(rng, dims, dtype=F32):
    return rng.uniform(-1, 1, dims).astype(NP[dtype])


def config(g, engine="matmul_small", tile=TINY, **knobs):
    c = registry.by_name(engine).default_config(api.problem(g)).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile)
    for k, v in knobs.items():
        c = c.with_knob(getattr(K, "CUDNN_KNOB_TYPE_" + k), v)
    return c


def run(g, c, pack):
    assert api.check_support(g, c) == (S.CUDNN_STATUS_SUCCESS, "")
    plan = api.build_plan(g, c)
    assert plan.workspace_size >= registry.by_name(c.engine).workspace_size(api.problem(g), c)
    ws = cuda.to_device(np.full(plan.workspace_size, 0xFF, np.uint8)) if plan.workspace_size else None
    api.execute(plan, pack, ws)
    return plan


def bias_relu_graph(b, m, n, k, dtype=F32, a_strides=None, b_strides=None, bias_dims=None):
    a, bt = tensor(1, (b, m, k), dtype, a_strides), tensor(2, (b, k, n), dtype, b_strides)
    bias, c = tensor(3, bias_dims or (1, 1, n), dtype), tensor(4, (b, m, n), dtype)
    mm = Matmul("mm", {"A": a, "B": bt}, {"C": virt(10)})
    add = Pointwise("bias", {"X": mm.outputs["C"], "B": bias}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_ADD)
    relu = Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": c}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return OpGraph([mm, add, relu]).finalize(), (a, bt, bias, c)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64])
def test_bias_relu_dtypes_through_heuristics(rng, dtype):
    g, (a, b, bias, c) = bias_relu_graph(1, 5, 6, 7, dtype)
    ecs = api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A)
    fused = [e for e in ecs if e.config.engine != "composite"]  # the unfused fallback plan comes after them
    assert fused and ecs[:len(fused)] == fused
    assert {e.config.engine for e in fused} <= {"matmul_simt", "matmul_small", "matmul_tc"}
    av, bv, biasv = rand(rng, a.dims, dtype), rand(rng, b.dims, dtype), rand(rng, bias.dims, dtype)
    out = out_buf(c)
    run(g, config(g), {1: dev(av, a), 2: dev(bv, b), 3: dev(biasv, bias), 4: out})
    expect = np.maximum(ref_mm(av.astype(np.float64), bv.astype(np.float64)) + biasv.astype(np.float64), 0)
    assert_close(read(out, c), expect, TOL[dtype])


def test_transposes_broadcast_batch_and_row_bias(rng):
    # A and B transposed (m and k contiguous), a row bias per batch
    bsz, m, n, k = 2, 5, 3, 6
    g, (a, b, bias, c) = bias_relu_graph(bsz, m, n, k, a_strides=(m * k, 1, m), b_strides=(k * n, 1, k),
                                         bias_dims=(bsz, m, 1))
    av, biasv = rand(rng, a.dims), rand(rng, bias.dims)
    bv = rand(rng, b.dims)
    out = out_buf(c)
    run(g, config(g, tile=TINY), {1: dev(av, a), 2: dev(bv, b), 3: dev(biasv, bias), 4: out})
    assert_close(read(out, c), np.maximum(ref_mm(av, bv) + biasv, 0), "float32")


def test_broadcast_b_batch_and_four_dims(rng):
    a, b, c = tensor(1, (2, 3, 4, 5)), tensor(2, (1, 1, 5, 3)), tensor(3, (2, 3, 4, 3))
    g = OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})]).finalize()
    av, bv = rand(rng, a.dims), rand(rng, b.dims)
    out = out_buf(c)
    run(g, config(g, "matmul_simt", tile=len(gc.MATMUL_TILES) - 3), {1: dev(av, a), 2: dev(bv, b), 3: out})
    assert_close(read(out, c), ref_mm(av, bv), "float32")


@pytest.mark.parametrize("buf", [1, 0])
def test_split_k_workspace_exact_and_notes(rng, buf):
    m, n, k = 4, 5, 24
    a, b, c = tensor(1, (1, m, k)), tensor(2, (1, k, n)), tensor(3, (1, m, n))
    g = OpGraph([Matmul("mm", {"A": a, "B": b}, {"C": c})]).finalize()
    cf = config(g, SPLIT_K=4, SPLIT_K_BUF=buf)
    eng = registry.by_name("matmul_small")
    assert eng.workspace_size(api.problem(g), cf) == (4 * m * n * 4 if buf else 0)
    assert (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in eng.config_notes(api.problem(g), cf)) == (buf == 0)
    av, bv = rand(rng, a.dims), rand(rng, b.dims)
    out = out_buf(c)
    run(g, cf, {1: dev(av, a), 2: dev(bv, b), 3: out})
    assert_close(read(out, c), ref_mm(av, bv), "float32")


def test_residual_scale_and_gelu(rng):
    # out = gelu(s * (A @ B) + R); s is a by-value scalar (folded into alpha; overridable per execute)
    m, n, k = 3, 4, 5
    a, b, r, o = tensor(1, (1, m, k)), tensor(2, (1, k, n)), tensor(3, (1, m, n)), tensor(4, (1, m, n))
    s = TensorDesc(5, (1, 1, 1), (1, 1, 1), F32, is_by_value=True, value=0.5, name="s")
    mm = Matmul("mm", {"A": a, "B": b}, {"C": virt(10)})
    sc = Pointwise("scale", {"X": mm.outputs["C"], "B": s}, {"Y": virt(11)}, mode=PM.CUDNN_POINTWISE_MUL)
    res = Pointwise("res", {"X": r, "B": sc.outputs["Y"]}, {"Y": virt(12)}, mode=PM.CUDNN_POINTWISE_ADD)
    act = Pointwise("gelu", {"X": res.outputs["Y"]}, {"Y": o}, mode=PM.CUDNN_POINTWISE_GELU_FWD)
    g = OpGraph([mm, sc, res, act]).finalize()
    av, bv, rv = rand(rng, a.dims), rand(rng, b.dims), rand(rng, r.dims)
    out = out_buf(o)
    plan = run(g, config(g), {1: dev(av, a), 2: dev(bv, b), 3: dev(rv, r), 4: out})
    assert_close(read(out, o), rpw(PM.CUDNN_POINTWISE_GELU_FWD, 0.5 * ref_mm(av, bv) + rv), "float32")
    api.execute(plan, {1: dev(av, a), 2: dev(bv, b), 3: dev(rv, r), 4: out, 5: -2.0})
    assert_close(read(out, o), rpw(PM.CUDNN_POINTWISE_GELU_FWD, -2.0 * ref_mm(av, bv) + rv), "float32")


def test_heuristics_rank_measured_best_first_and_small_for_small():
    big = OpGraph([Matmul("mm", {"A": tensor(1, (1, 4096, 4096)), "B": tensor(2, (1, 4096, 4096))},
                          {"C": tensor(3, (1, 4096, 4096))})]).finalize()
    top = api.get_heuristics(big, HM.CUDNN_HEUR_MODE_A)[0]
    assert top.config.engine == "matmul_simt"
    assert gc.MATMUL_TILES[top.config.get(K.CUDNN_KNOB_TYPE_TILE_SIZE)].label == "128x128x8 t8x8 vec4 fast"
    skinny = OpGraph([Matmul("mm", {"A": tensor(1, (1, 256, 8192)), "B": tensor(2, (1, 8192, 256))},
                             {"C": tensor(3, (1, 256, 256))})]).finalize()
    top = api.get_heuristics(skinny, HM.CUDNN_HEUR_MODE_A)[0]
    assert top.config.get(K.CUDNN_KNOB_TYPE_SPLIT_K) > 1
    fb = api.get_heuristics(skinny, HM.CUDNN_HEUR_MODE_FALLBACK)
    assert "matmul_small" in {e.config.engine for e in fb} and "matmul_simt" not in {e.config.engine for e in fb}


def test_unsupported_cases_say_why():
    a, b, c = tensor(1, (1, 4, 5)), tensor(2, (1, 5, 3)), tensor(3, (1, 4, 3))
    mo = tensor(4, (1, 1, 1), DT.CUDNN_DATA_INT32)
    g = OpGraph([Matmul("mm", {"A": a, "B": b, "M_OVERRIDE": mo}, {"C": c})]).finalize()
    for eng in ("matmul_simt", "matmul_small"):
        st, why = api.check_support(g, eng)
        assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "M_OVERRIDE" in why and "'mm'" in why
    # a comparison in the chain has a boolean result: no float epilogue step
    a, b, t, o = tensor(1, (1, 4, 5)), tensor(2, (1, 5, 3)), tensor(3, (1, 4, 3)), tensor(4, (1, 4, 3))
    mm = Matmul("mm", {"A": a, "B": b}, {"C": virt(10)})
    g2 = OpGraph([mm, Pointwise("cmp", {"X": mm.outputs["C"], "B": t}, {"Y": o},
                                mode=PM.CUDNN_POINTWISE_CMP_GT)]).finalize()
    st, why = api.check_support(g2, "matmul_small")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "cmp" in why
    # mixed fp64 / fp32
    g3 = OpGraph([Matmul("mm", {"A": tensor(1, (1, 2, 2), F64), "B": tensor(2, (1, 2, 2))},
                         {"C": tensor(3, (1, 2, 2))})]).finalize()
    st, why = api.check_support(g3, "matmul_simt")
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE and "float64" in why


def test_general_strides_transposed_output_and_residual(rng):
    # A every other element along k (no unit stride: the general "km" loader), C written transposed
    m, n, k = 5, 4, 6
    a = tensor(1, (1, m, k), strides=(2 * m * k, 2 * k, 2))
    b = tensor(2, (1, k, n))
    r = tensor(3, (1, m, n), strides=(m * n, 1, m))
    o = tensor(4, (1, m, n), strides=(m * n, 1, m))
    mm = Matmul("mm", {"A": a, "B": b}, {"C": virt(10)})
    res = Pointwise("res", {"X": mm.outputs["C"], "B": r}, {"Y": o}, mode=PM.CUDNN_POINTWISE_SUB)
    g = OpGraph([mm, res]).finalize()
    av, bv, rv = rand(rng, a.dims), rand(rng, b.dims), rand(rng, r.dims)
    out = out_buf(o)
    run(g, config(g, tile=TINY - 1), {1: dev(av, a), 2: dev(bv, b), 3: dev(rv, r), 4: out})
    assert_close(read(out, o), ref_mm(av, bv) - rv, "float32")
