"""Matmul correctness for every layout an engine claims, through what users run: pygraph's heuristic plans.

For A row-major (m, k) / column-major (Aᵀ stored contiguous: the "TN" GEMM frameworks issue), B row-major /
column-major, padded leading dims (ld > the packed one, C too: its gaps must stay untouched), full,
broadcast (batch dim 1) and stride-0 batches, FP32, TF32 (opted in), FP16, BF16 and FP8 I/O, every plan the
heuristics give under modes A, B and FALLBACK and every plan build_plans(ALL) builds runs on poisoned
outputs and is compared with the float64 oracle at its precision's tolerance. An engine that cannot do a
layout must refuse it in check_support with a reason (then another engine runs it), never answer wrong.

Tiny shapes in the simulator, including odd ones (3x6x5x7: no tensor-core engine takes K = 7) and one
of multiples of 8 (the tensor-core engines take part); real shapes (257x129x65, 1024^3, ...) with the
``gpu`` mark on the H200.
"""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import TOL, rel_err

D = cudnn.data_type
HM = cudnn.heur_mode
#: data type -> (pygraph data type, host dtype, storage dtype, tolerance key, poison bits)
DTYPES = {
    "fp32": (D.FLOAT, np.float32, np.float32, "float32"),
    "tf32": (D.FLOAT, np.float32, np.float32, "float32"),
    "fp16": (D.HALF, np.float16, np.float16, "float16"),
    "bf16": (D.BFLOAT16, ml_dtypes.bfloat16, np.uint16, "bfloat16"),
    "fp8": (D.FP8_E4M3, ml_dtypes.float8_e4m3fn, np.uint8, "bfloat16"),
}
POISON = {np.dtype(np.float32): np.float32(np.nan), np.dtype(np.float16): np.float16(np.nan),
          np.dtype(np.uint16): np.uint16(0x7FC0), np.dtype(np.uint8): np.uint8(0x7F)}
MODES = (HM.A, HM.B, HM.FALLBACK)
TC_ENGINES = ("matmul_tc", "matmul_wgmma")


def strides_of(dims, order, pad, zero_batch=False):
    """Element strides of a [batch, rows, cols] tensor: ``order`` "row" (cols contiguous) or "col" (rows
    contiguous), the leading dim ``pad`` elements past the packed one, the batch stride one matrix (0 with
    ``zero_batch``)."""
    _, r, c = dims
    if order == "row":
        ld = c + pad
        return [0 if zero_batch else r * ld, ld, 1]
    ld = r + pad
    return [0 if zero_batch else c * ld, 1, ld]


def place(x, strides, storage):
    """A flat poisoned device buffer holding ``x`` (host dtype) at element ``strides``."""
    span = 1 + sum((d - 1) * s for d, s in zip(x.shape, strides))
    buf = np.full(span, POISON[np.dtype(storage)], storage)
    view = np.lib.stride_tricks.as_strided(buf.view(x.dtype), x.shape, [s * x.itemsize for s in strides])
    view[...] = x
    return cuda.to_device(buf)


def read(buf, dims, strides, host):
    h = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(h.view(host), dims, [s * h.itemsize for s in strides]).astype(np.float64)


def outside_view_untouched(buf, dims, strides, storage):
    """Whether every element of ``buf`` that the (dims, strides) view does not address still holds poison."""
    h = buf.copy_to_host().view(storage)
    mask = np.ones(h.shape[0], bool)
    idx = np.zeros(1, np.int64)
    for d, s in zip(dims, strides):
        idx = (idx[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).ravel()
    mask[idx] = False
    rest = h[mask]
    if np.dtype(storage).kind == "f":
        return bool(np.isnan(rest).all())
    return bool((rest == POISON[np.dtype(storage)]).all())


def make_case(rng, dtype, bsz, m, n, k, a_order, b_order, batch="full", pad=0, c_order="row"):
    """Host inputs, strides, the float64 oracle and the dims of one matmul problem."""
    _, host, _, _ = DTYPES[dtype]
    a_dims = [1 if batch == "bcast_a" else bsz, m, k]
    b_dims = [1 if batch == "bcast_b" else bsz, k, n]
    a_st = strides_of(a_dims, a_order, pad, batch == "zero_a")
    b_st = strides_of(b_dims, b_order, pad, batch == "zero_b")
    c_dims = [bsz, m, n]
    c_st = strides_of(c_dims, c_order, pad)
    a = rng.uniform(-1, 1, a_dims).astype(host)
    b = rng.uniform(-1, 1, b_dims).astype(host)
    if batch == "zero_a":       # one matrix read for every batch index
        a[:] = a[:1]
    if batch == "zero_b":
        b[:] = b[:1]
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return dict(a=a, b=b, a_dims=a_dims, b_dims=b_dims, c_dims=c_dims, a_st=a_st, b_st=b_st, c_st=c_st, ref=ref)


def make_graph(case, dtype):
    dt = DTYPES[dtype][0]
    out_dt = D.FLOAT if dtype == "fp8" else dt
    g = cudnn.pygraph(io_data_type=dt, intermediate_data_type=D.FLOAT, compute_data_type=D.FLOAT)
    A = g.tensor(name="A", dim=case["a_dims"], stride=case["a_st"], data_type=dt)
    B = g.tensor(name="B", dim=case["b_dims"], stride=case["b_st"], data_type=dt)
    C = g.matmul(A, B, compute_data_type=D.FLOAT, name="mm")
    C.set_output(True).set_data_type(out_dt).set_stride(case["c_st"])
    return g, A, B, C, out_dt


def plans_of(case, dtype, mode):
    """(graph, tensors, plan count) of one heuristic mode, every supported plan built (policy ALL)."""
    g, A, B, C, out_dt = make_graph(case, dtype)
    g.validate()
    g.build_operation_graph()
    if dtype == "tf32":
        g.select_numeric_notes([cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    g.create_execution_plans([mode])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    return g, (A, B, C, out_dt), g.get_execution_plan_count()


def run_plan(g, tensors, i, case, dtype):
    """Execute plan ``i`` on fresh poisoned buffers; (output in float64, gaps of C untouched)."""
    A, B, C, out_dt = tensors
    _, host, storage, _ = DTYPES[dtype]
    o_host, o_storage = (np.float32, np.float32) if dtype == "fp8" else (host, storage)
    c_span = 1 + sum((d - 1) * s for d, s in zip(case["c_dims"], case["c_st"]))
    out = cuda.to_device(np.full(c_span, POISON[np.dtype(o_storage)], o_storage))
    ws = g.get_workspace_size_plan_at_index(i)
    wbuf = cuda.to_device(np.full(max(ws, 1), 0xFF, np.uint8))
    g.execute_plan_at_index({A: place(case["a"], case["a_st"], storage), B: place(case["b"], case["b_st"], storage),
                             C: out}, wbuf, i)
    got = read(out, case["c_dims"], case["c_st"], o_host)
    return got, outside_view_untouched(out, case["c_dims"], case["c_st"], o_storage)


def tolerance(g, i, dtype):
    notes = [str(n) for n in g.get_numerical_notes_for_plan_at_index(i)]
    if DTYPES[dtype][3] == "float32" and any("DOWN_CONVERT" in s for s in notes):
        return "tf32"
    return DTYPES[dtype][3]


def check_every_plan(case, dtype, modes=MODES, per_engine=False):
    """Run the first plan of each heuristic mode and every plan build_plans(ALL) builds (each distinct plan
    once; ``per_engine``: only each engine's first plan of the list, for the real shapes' JIT time); return
    the plan names run. Fails with the plan's name on a wrong answer."""
    seen, failures = {}, []
    for mode in modes:
        g, tensors, count = plans_of(case, dtype, mode)
        assert count >= 1
        engines = set()
        for i in range(count):
            name = g.get_plan_name_at_index(i)
            engine = name.split("(")[0]
            if name in seen or (dtype == "tf32" and tolerance(g, i, dtype) != "tf32"):
                continue            # run once; with TF32 selected, the filter bars the other plans
            if per_engine and i > 0 and engine in engines:
                continue
            engines.add(engine)
            got, untouched = run_plan(g, tensors, i, case, dtype)
            tol = tolerance(g, i, dtype)
            err = rel_err(got, case["ref"])
            seen[name] = err
            if not err <= TOL[tol] or not untouched:
                bad = np.mean(~np.isclose(got, case["ref"], rtol=10 * TOL[tol], atol=10 * TOL[tol]))
                failures.append(f"{mode.name} plan {i} {name}: rel err {err:.3g} (tol {tol} {TOL[tol]:g}), "
                                f"{100 * bad:.0f}% of elements wrong, C's gaps untouched: {untouched}")
    assert not failures, "\n".join(failures)
    return seen


ORDERS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]
#: (batch, M, N, K): odd (no tensor-core engine: K = 7), multiples of 8 (tensor-core engines run)
ODD, TC = (3, 6, 5, 7), (2, 24, 16, 32)


@pytest.mark.parametrize("shape", [ODD, TC], ids=["odd3x6x5x7", "tc2x24x16x32"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_every_plan_every_layout(rng, shape, dtype, a_order, b_order):
    case = make_case(rng, dtype, *shape, a_order, b_order)
    ran = check_every_plan(case, dtype)
    if shape == TC and dtype != "fp32":     # the tensor-core engines claim every 16-bit layout: they ran
        assert any(e in name for name in ran for e in TC_ENGINES), sorted(ran)


VARIANTS = [("bcast_a", 0, "row"), ("bcast_b", 0, "row"), ("zero_a", 0, "row"), ("zero_b", 0, "row"),
            ("full", 8, "row"), ("full", 3, "col")]


@pytest.mark.parametrize("shape,dtype", [(ODD, "fp32"), (TC, "fp16"), (TC, "bf16")],
                         ids=["odd_fp32", "tc_fp16", "tc_bf16"])
@pytest.mark.parametrize("batch,pad,c_order", VARIANTS,
                         ids=[f"{b}_pad{p}_C{c}" for b, p, c in VARIANTS])
@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_broadcast_and_padded_layouts(rng, shape, dtype, batch, pad, c_order, a_order, b_order):
    case = make_case(rng, dtype, *shape, a_order, b_order, batch=batch, pad=pad, c_order=c_order)
    check_every_plan(case, dtype, modes=(HM.A, HM.FALLBACK))


@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_tf32_opt_in_every_layout(rng, a_order, b_order):
    """With TF32 selected (DOWN_CONVERT_INPUTS), the tensor-core engines run FP32 A and B only k-contiguous
    (B stored (n, k)) and right; every other layout has no TF32 plan and is refused, never run wrong."""
    case = make_case(rng, "tf32", *TC, a_order, b_order)
    if (a_order, b_order) == ("row", "col"):
        ran = check_every_plan(case, "tf32", modes=(HM.A,))
        assert ran and all(any(e in name for e in TC_ENGINES) for name in ran), sorted(ran)
        return
    with pytest.raises(cudnn.cudnnGraphNotSupportedError):
        plans_of(case, "tf32", HM.A)


@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_fp8_layouts_run_right_or_are_refused(rng, a_order, b_order):
    """FP8 (e4m3) A and B: matmul_tc runs k-contiguous A and B (B stored (n, k)); any other layout is
    refused with a reason naming the layout (no engine answers it wrong)."""
    case = make_case(rng, "fp8", 2, 32, 16, 32, a_order, b_order)
    if (a_order, b_order) == ("row", "col"):
        ran = check_every_plan(case, "fp8", modes=(HM.A,))
        assert any("matmul_tc" in name for name in ran), sorted(ran)
        return
    g, *_ = make_graph(case, "fp8")
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.build_operation_graph()
        g.create_execution_plans([HM.A, HM.FALLBACK])
        g.check_support()
    assert "k-contiguous" in str(e.value), str(e.value)


def test_int8_io_is_refused_with_a_reason():
    """No matmul engine runs INT8 I/O: the graph is refused naming the tensor, never run wrong."""
    g = cudnn.pygraph(io_data_type=D.INT8, intermediate_data_type=D.FLOAT, compute_data_type=D.FLOAT)
    A = g.tensor(name="A", dim=[3, 6, 7], stride=[42, 1, 6], data_type=D.INT8)
    B = g.tensor(name="B", dim=[3, 7, 5], stride=[35, 5, 1], data_type=D.INT8)
    C = g.matmul(A, B, compute_data_type=D.INT32, name="mm")
    C.set_output(True).set_data_type(D.FLOAT)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g.build([HM.A, HM.FALLBACK])
    assert "A" in str(e.value) and "INT8" in str(e.value), str(e.value)


def test_hand_picked_tile_out_of_range_is_refused_with_a_reason(rng):
    """A hand-picked TILE_SIZE past an engine's table is NOT_SUPPORTED naming the knob (it indexed no tile:
    an IndexError escaped create_execution_plan before), for every matmul engine of the graph."""
    case = make_case(rng, "fp16", *TC, "col", "row")
    g, *_ = make_graph(case, "fp16")
    g.build([HM.A])
    engines = {g.get_engine_and_knobs_at_index(i)[0] for i in range(g.get_execution_plan_count())}
    assert len(engines) >= 2
    for e in sorted(engines):
        n = g.get_execution_plan_count()
        g.create_execution_plan(e, {cudnn.knob_type.TILE_SIZE: 99})
        with pytest.raises(cudnn.cudnnGraphNotSupportedError) as err:
            g.build_plan_at_index(n)
        assert "TILE_SIZE = 99" in str(err.value), str(err.value)


# ------------------------------------------------------------------------------ real shapes on the GPU

GPU_SHAPES = [(1, 257, 129, 65), (2, 264, 136, 72), (1, 1024, 1024, 1024)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=["x".join(map(str, s)) for s in GPU_SHAPES])
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_gpu_every_engine_every_layout(rng, shape, dtype, a_order, b_order):
    """Real shapes: the first plan of modes A / B / FALLBACK and each engine's best plan of the list (every
    plan of every case would be some 650 JIT compiles: test_gpu_every_plan runs them at one shape)."""
    case = make_case(rng, dtype, *shape, a_order, b_order)
    if dtype == "tf32" and ((a_order, b_order) != ("row", "col") or shape[3] % 4):
        # TF32 runs k-contiguous A and B only, with rows 16-byte aligned for cp.async (K = 65 is not)
        with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
            plans_of(case, dtype, HM.A)
        assert "k-contiguous" in str(e.value) or "in FP32 elements K=65" in str(e.value), str(e.value)[-3000:]
        return
    ran = check_every_plan(case, dtype, per_engine=True, modes=(HM.A,) if dtype == "tf32" else MODES)
    if shape[1] % 8 == 0 and shape[3] % 8 == 0 and dtype != "fp32":
        assert any(e in name for name in ran for e in TC_ENGINES), sorted(ran)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_gpu_every_plan(rng, dtype, a_order, b_order):
    """Every plan build_plans(ALL) builds at 264x136x72 (batch 2), each layout (NCUDNN_SLOW=1: JIT-bound)."""
    check_every_plan(make_case(rng, dtype, 2, 264, 136, 72, a_order, b_order), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("batch,pad,c_order", VARIANTS, ids=[f"{b}_pad{p}_C{c}" for b, p, c in VARIANTS])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("a_order,b_order", ORDERS, ids=[f"A{a}_B{b}" for a, b in ORDERS])
def test_gpu_broadcast_and_padded_layouts(rng, batch, pad, c_order, dtype, a_order, b_order):
    case = make_case(rng, dtype, 3, 264, 136, 72, a_order, b_order, batch=batch, pad=pad, c_order=c_order)
    check_every_plan(case, dtype, modes=(HM.A, HM.FALLBACK), per_engine=True)
