"""Engine matmul_wgmma with FP32 operands on TF32 (wgmma m64nNk8 .tf32): end to end through the API against
the float64 oracle (simulator at tiny shapes, real shapes with NCUDNN_SHAPES=gpu), its notes, its refusals,
and the H200 ranking (TF32 graphs pick it above matmul_tc; FMA math or no TF32 opt-in never picks it)."""
from dataclasses import replace

import numpy as np
import pytest

from ncudnn.engines import api, registry
from ncudnn.engines import device as devmod
from ncudnn.ir import Matmul, OpGraph, TensorDesc, packed_strides
from ncudnn.reference.matmul import matmul as ref_mm
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendHeurMode_t as HM
from ncudnn.types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as DT
from ncudnn.types import cudnnStatus_t as S
from test_matmul_tc_engine import bias_relu, out_dev, rand, read, to_dev

F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
ENGINE = "matmul_wgmma"


def ctx(tf32=True, tc=True):
    return replace(api.context(), allow_tensor_cores=tc, allow_tf32=tf32)


def h200(tf32=True, tc=True):
    return replace(ctx(tf32, tc), device=devmod.H200, simulator=False)


def plain(s, dt, b_nk):
    """(1, s, s) x (1, s, s) matmul of ``dt``; B stored (n, k) when ``b_nk``."""
    t = lambda uid, d, st=None: TensorDesc(uid, d, st or packed_strides(d), dt, name=f"t{uid}")  # noqa: E731
    b = t(2, (1, s, s), (s * s, 1, s)) if b_nk else t(2, (1, s, s))
    return OpGraph([Matmul("mm", {"A": t(1, (1, s, s)), "B": b}, {"C": t(3, (1, s, s))})],
                   compute_dtype=F32).finalize()


def test_wgt_tf32_bias_relu_batched_edges(rng):
    # FP32 A (m, k), B stored (n, k); M / N off the tile, K a multiple of 4 with a tail past the 32-wide k tiles
    bsz, m, n, k = size((2, 24, 40, 44), (2, 1000, 776, 1100))
    g, (a, b, bias, c) = bias_relu(bsz, m, n, k, F32, b_strides=(n * k, 1, k))
    cx = ctx()
    eng = registry.by_name(ENGINE)
    sub = api.problem(g)
    assert eng.check_support(sub, cx) == (S.CUDNN_STATUS_SUCCESS, "")
    cfg = eng.candidates(sub, cx)[0]
    notes = eng.config_notes(sub, cfg)
    assert NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE in notes and NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS in notes
    plan = api.build_plan(g, cfg, cx)
    av, bv, biasv = rand(rng, a.dims, F32), rand(rng, b.dims, F32), rand(rng, bias.dims, F32)
    out = out_dev(c)
    api.execute(plan, {1: to_dev(av, a), 2: to_dev(bv, b), 3: to_dev(biasv, bias), 4: out})
    expect = np.maximum(ref_mm(av.astype(np.float64), bv.astype(np.float64)) + biasv, 0)
    assert_close(read(out, c), expect, "tf32")


def test_wgt_tf32_refusals_name_the_cause():
    eng = registry.by_name(ENGINE)
    g, _ = bias_relu(1, 64, 64, 64, F32, b_strides=(64 * 64, 1, 64))
    st, why = eng.check_support(api.problem(g), ctx(tf32=False))      # no TF32 opt-in / NVIDIA_TF32_OVERRIDE=0
    assert st != S.CUDNN_STATUS_SUCCESS and "TF32" in why
    st, why = eng.check_support(api.problem(g), ctx(tc=False))         # FMA math
    assert st != S.CUDNN_STATUS_SUCCESS
    g, _ = bias_relu(1, 64, 64, 64, F32)                                # B (k, n): no tf32 transpose
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT and "k-contiguous" in why
    g, _ = bias_relu(1, 64, 64, 62, F32, b_strides=(64 * 62, 1, 62))    # K not a multiple of 4 FP32
    st, why = eng.check_support(api.problem(g), ctx())
    assert st == S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT


@pytest.mark.parametrize("s", [4096, 8192])
def test_wgt_h200_ranking_tf32_fp16(s):
    # TF32 (B stored (n, k)): matmul_wgmma first, ahead of every matmul_tc config
    ecs = api.get_heuristics(plain(s, F32, True), HM.CUDNN_HEUR_MODE_A, h200())
    names = [e.name for e in ecs]
    assert names[0] == ENGINE, names[:5]
    eng = registry.by_name(ENGINE)
    kc = eng.tc_config(ecs[0].config)        # 128x256, loads STAGES - 1 ahead, 3 stages for TF32 (measured best)
    assert (kc.BLOCK_M, kc.BLOCK_N, kc.EARLY, kc.STAGES) == (128, 256, 1, 3)
    assert "matmul_tc" in names and names.index("matmul_tc") > names.index(ENGINE)
    # no TF32 opt-in, or FMA math: neither tensor-core engine
    for cx in (h200(tf32=False), h200(tc=False)):
        names = [e.name for e in api.get_heuristics(plain(s, F32, True), HM.CUDNN_HEUR_MODE_A, cx)]
        assert names and ENGINE not in names and "matmul_tc" not in names, names[:5]
    # FP16 (B (k, n), the bench layout) and BF16: matmul_wgmma first
    for dt in (F16, BF16):
        ecs = api.get_heuristics(plain(s, dt, False), HM.CUDNN_HEUR_MODE_A, h200(tf32=False))
        assert ecs[0].name == ENGINE, (dt, [e.name for e in ecs[:5]])
        kc = eng.tc_config(ecs[0].config)
        assert (kc.BLOCK_M, kc.BLOCK_N, kc.EARLY, kc.STAGES) == (128, 256, 1, 4)


@pytest.mark.parametrize("dt", ["tf32", "float16"])
def test_wgt_pygraph_bench_layouts(rng, dt):
    # the bench's graphs through pygraph: FP32 with the DOWN_CONVERT_INPUTS opt-in, B stored (n, k); FP16 with B
    # (k, n) packed. Both plan on matmul_wgmma (TF32 noted DOWN_CONVERT_INPUTS) and match float64.
    from numba import cuda

    import ncudnn as cudnn
    from ncudnn.testing import poison_value
    m, n, k = size((40, 48, 56), (1000, 1032, 1096))
    tf32 = dt == "tf32"
    io = cudnn.data_type.FLOAT if tf32 else cudnn.data_type.HALF
    npdt = np.float32 if tf32 else np.float16
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[1, m, k], stride=[m * k, k, 1])
    B = g.tensor(name="B", dim=[1, k, n], stride=[k * n, 1, k] if tf32 else [k * n, n, 1])
    C = g.matmul(A=A, B=B, compute_data_type=cudnn.data_type.FLOAT)
    C.set_output(True).set_data_type(io)
    g.validate()
    g.build_operation_graph()
    if tf32:
        g.select_numeric_notes([cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.create_execution_plans([cudnn.heur_mode.A])
    g.check_support()
    g.build_plans()
    i = g.get_selected_plan_index()
    assert g.get_plan_name_at_index(i).startswith(ENGINE)
    notes = [str(x) for x in g.get_numerical_notes_for_plan_at_index(i)]
    assert any("TENSOR_CORE" in s for s in notes) and any("DOWN_CONVERT" in s for s in notes) == tf32
    a = rng.uniform(-1, 1, (m, k)).astype(npdt)
    b = rng.uniform(-1, 1, (k, n)).astype(npdt)
    out = cuda.to_device(np.full(m * n, poison_value(npdt), npdt))
    g.execute({A: cuda.to_device(a), B: cuda.to_device(np.ascontiguousarray(b.T) if tf32 else b), C: out},
              cuda.device_array(max(g.get_workspace_size(), 1), np.uint8))
    expect = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(out.copy_to_host().reshape(m, n), expect, "tf32" if tf32 else "float16")
