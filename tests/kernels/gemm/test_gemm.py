"""GEMM kernel (ncudnn.kernels.gemm) against the float64 oracle, at simulator-sized shapes."""
import numpy as np
import pytest

from ncudnn import reference as R
from ncudnn.kernels.runtime import dtypes as dt
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.gemm import CONFIGS, GemmConfig, check, keep, make_gemm, run_gemm
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.kernels.gemm import splitk
from numba import cuda

SMALL = GemmConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0)
TINY = GemmConfig(BLOCK_M=8, BLOCK_N=16, BLOCK_K=4, THREAD_M=2, THREAD_N=4, WARP_M=0, WARP_N=0,
                  STAGES=1)
VEC4 = GemmConfig(BLOCK_M=16, BLOCK_N=32, BLOCK_K=4, THREAD_M=4, THREAD_N=4, WARP_M=0, WARP_N=0,
                  VEC=4, UNROLL_K=4)
BIG = CONFIGS[0]


def dims():
    return size((19, 21, 13), (1000, 1100, 700))


def cfg():
    return size(SMALL, BIG)


def store(mat, layout):
    """(flat storage, (row, col) strides) of a 2-D host matrix; layout names the contiguous index last."""
    r, c = mat.shape
    if layout in ("mk", "kn"):
        return np.ascontiguousarray(mat).ravel(), (c, 1)
    return np.ascontiguousarray(mat.T).ravel(), (1, r)


def out_buffer(n, dtype="float32"):
    return np.full(n, poison_value(np.float32), dtype=np.float32).astype(dt.storage_dtype(dtype)) \
        if dtype != "bfloat16" else np.full(n, 0x7FC0, dtype=np.uint16)


@pytest.mark.parametrize("a_layout", ["mk", "km"])
@pytest.mark.parametrize("b_layout", ["kn", "nk"])
def test_layouts(rng, a_layout, b_layout):
    M, N, K = dims()
    a, b = random(rng, (M, K)), random(rng, (K, N))
    fa, sa = store(a, a_layout)
    fb, sb = store(b, b_layout)
    c = out_buffer(M * N)
    k = make_gemm(cfg(), a_layout, b_layout)
    run_gemm(k, fa, fb, c, M=M, N=N, K=K, a_strides=sa, b_strides=sb, c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


@pytest.mark.parametrize("layouts", [("mk", "kn"), ("km", "nk")])
def test_vec4_fragments(rng, layouts):
    """VEC=4: 4-row / 4-column fragment groups (16-byte shared loads on a GPU), odd edges."""
    M, N, K = size((21, 35, 11), (1000, 1100, 700))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    fa, sa = store(a, layouts[0])
    fb, sb = store(b, layouts[1])
    c = out_buffer(M * N)
    k = make_gemm(size(VEC4, BIG), *layouts)
    run_gemm(k, fa, fb, c, M=M, N=N, K=K, a_strides=sa, b_strides=sb, c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


def test_tiny_block_stage1_and_column_major_output(rng):
    M, N, K = size((11, 18, 9), (500, 600, 300))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    c = out_buffer(M * N)
    k = make_gemm(size(TINY, BIG.replace(STAGES=1)), "mk", "kn")
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(1, M))
    assert_close(c.reshape(N, M).T, R.matmul(a, b), "float32")


@pytest.mark.parametrize("swizzle", [2, 3])
def test_swizzled_tile_order(rng, swizzle):
    """Grouped (GROUP_M) tile order: every tile still computed once, ragged last group included."""
    M, N, K = size((40, 37, 6), (1000, 1100, 300))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    c = out_buffer(M * N)
    k = make_gemm(size(TINY, BIG).replace(SWIZZLE=swizzle), "mk", "kn")
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


def test_arbitrary_strides_and_broadcast_batch(rng):
    """A: every other element of a larger buffer; B broadcast over the batch (stride 0)."""
    M, N, K = size((9, 10, 7), (300, 200, 100))
    B1 = 3
    big_a = random(rng, (B1, M, 2 * K + 1))
    a = big_a[:, :, 1::2][:, :, :K]
    b = random(rng, (K, N))
    c = out_buffer(B1 * M * N)
    k = make_gemm(cfg(), "km", "kn")
    run_gemm(k, big_a.ravel()[1:], b.ravel(), c, M=M, N=N, K=K, batch=B1,
             a_strides=(M * (2 * K + 1), 2 * K + 1, 2), b_strides=(0, N, 1), c_strides=(M * N, N, 1))
    assert_close(c.reshape(B1, M, N), R.matmul(a, b[None]), "float32")


def test_two_batch_dims_broadcast(rng):
    """(2, 1) x (1, 3) batches -> (2, 3): numpy-style broadcasting through two batch strides."""
    M, N, K = size((7, 6, 5), (100, 90, 80))
    a, b = random(rng, (2, 1, M, K)), random(rng, (1, 3, K, N))
    c = out_buffer(6 * M * N)
    k = make_gemm(cfg(), "mk", "kn")
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, batch=(2, 3),
             a_strides=(M * K, 0, K, 1), b_strides=(0, K * N, N, 1), c_strides=(3 * M * N, M * N, N, 1))
    assert_close(c.reshape(2, 3, M, N), R.matmul(a, b), "float32")


@pytest.mark.parametrize("mode", ["workspace", "atomic"])
def test_split_k(rng, mode):
    M, N, K = size((10, 12, 37), (256, 256, 4096))
    a, b = random(rng, (M, K)), random(rng, (K, N))
    c0 = random(rng, (M, N))
    c = c0.ravel().copy()
    k = make_gemm(cfg().replace(SPLIT_K=3, SPLIT_MODE=mode), "mk", "kn")
    assert k.deterministic == (mode == "workspace")
    ws_elems = k.workspace_size(M, N) // 4
    assert ws_elems == (3 * M * N if mode == "workspace" else 0)
    ws = np.full(ws_elems, np.nan, np.float32) if ws_elems else None
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1), alpha=0.5, beta=-2.0, workspace=ws)
    assert_close(c.reshape(M, N), 0.5 * R.matmul(a, b) - 2.0 * c0, "float32")


def test_split_k_workspace_is_checked(rng):
    k = make_gemm(SMALL.replace(SPLIT_K=2), "mk", "kn")
    a = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="workspace"):
        run_gemm(k, a, a, a.copy(), M=4, N=4, K=4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1),
                 workspace=np.zeros(3, np.float32))


def test_beta_zero_never_reads_output_and_beta_blends(rng):
    M, N, K = dims()
    a, b = random(rng, (M, K)), random(rng, (K, N))
    k = make_gemm(cfg(), "mk", "kn")
    c = out_buffer(M * N)            # NaN: read with beta == 0 would poison the result
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1), alpha=1.5)
    assert_close(c.reshape(M, N), 1.5 * R.matmul(a, b), "float32")
    c0 = random(rng, (M, N))
    c = c0.ravel().copy()
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1), alpha=-1.0, beta=0.75)
    assert_close(c.reshape(M, N), -R.matmul(a, b) + 0.75 * c0, "float32")


@pytest.mark.parametrize("io", ["float16", "bfloat16"])
def test_half_inputs_and_outputs(rng, io):
    import ml_dtypes  # noqa: F401
    M, N, K = dims()
    a = random(rng, (M, K)).astype(np.float16 if io == "float16" else "bfloat16")
    b = random(rng, (K, N)).astype(a.dtype)
    c = out_buffer(M * N, io)
    k = make_gemm(cfg(), "mk", "kn", (io, io, io))
    run_gemm(k, dt.to_storage(a).ravel(), dt.to_storage(b).ravel(), c, M=M, N=N, K=K,
             a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1))
    assert_close(dt.from_storage(c, io).reshape(M, N), R.matmul(a, b), io)


def test_half_inputs_float32_output(rng):
    M, N, K = dims()
    a = random(rng, (M, K)).astype(np.float16)
    b = random(rng, (K, N)).astype(np.float16)
    c = out_buffer(M * N)
    k = make_gemm(cfg(), "mk", "kn", ("float16", "float16", "float32"))
    run_gemm(k, a.ravel(), b.ravel(), c, M=M, N=N, K=K, a_strides=(K, 1), b_strides=(N, 1),
             c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float32")


def test_float64(rng):
    M, N, K = dims()
    a, b = random(rng, (M, K), np.float64), random(rng, (K, N), np.float64)
    c = np.full(M * N, np.nan)
    k = make_gemm(cfg().replace(VEC=1), "km", "kn", ("float64",) * 3)  # VEC=4 needs 4-byte accumulators
    assert k.ftype == "float64"
    fa, sa = store(a, "km")
    run_gemm(k, fa, b.ravel(), c, M=M, N=N, K=K, a_strides=sa, b_strides=(N, 1), c_strides=(N, 1))
    assert_close(c.reshape(M, N), R.matmul(a, b), "float64")


def test_config_list_and_keep():
    for c in CONFIGS:
        assert check(c) == (True, ""), c
    assert not check(SMALL.replace(THREAD_M=3))[0]
    assert not check(SMALL.replace(VEC=4))[0]            # THREAD_M = 2 is not a multiple of 4
    assert not check(VEC4, itemsize=8)[0]                # VEC=4 is float32-only
    assert not check(VEC4.replace(UNROLL_K=3))[0]
    assert not check(BIG.replace(BLOCK_K=64, STAGES=2, BLOCK_M=256, THREAD_M=16))[0]
    prob = {"M": 4096, "N": 4096, "K": 4096}
    assert keep(BIG, prob)
    assert not keep(BIG, {"M": 8, "N": 8, "K": 8})
    assert not keep(BIG.replace(SPLIT_K=4, SPLIT_MODE="atomic"), dict(prob, deterministic=True))
    assert not keep(CONFIGS[0], dict(prob, dtype="float64")) and keep(CONFIGS[5], dict(prob, dtype="float64"))


def test_launcher_rejects_bad_strides():
    k = make_gemm(SMALL, "mk", "kn")
    a = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="unit k stride"):
        run_gemm(k, a, a, a.copy(), M=4, N=4, K=4, a_strides=(1, 4), b_strides=(4, 1), c_strides=(4, 1))
    with pytest.raises(ValueError, match="reach past"):
        run_gemm(k, a, a, a.copy(), M=5, N=4, K=4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1))


# the narrow (split 2) and the wide (split 8) split-K reduce end in one epilogue store (splitk.make_store)
_sk_SMALL = GemmConfig(BLOCK_M=8, BLOCK_N=8, BLOCK_K=4, THREAD_M=2, THREAD_N=2, WARP_M=0, WARP_N=0, UNROLL_K=1)


@pytest.mark.parametrize("split", [2, 8])
def test_split_k_narrow_and_wide_reduce_bias_residual_relu(rng, split):
    M, N, K = 6, 10, 40
    spec = ep.EpilogueSpec((ep.bias("col"), ep.residual(), ep.relu()))
    kern = make_gemm(_sk_SMALL.replace(SPLIT_K=split), "mk", "kn", epilogue=spec)
    assert kern.bk.reduce_shape(1) == (split, 1) and (split >= splitk.WIDE_FROM) == (split == 8)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    res = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    c = cuda.to_device(np.full(M * N, poison_value(np.float32), np.float32))
    ws = cuda.to_device(np.full(kern.bk.workspace_elems(M, N, 1), np.nan, np.float32))
    run_gemm(kern, cuda.to_device(a.ravel()), cuda.to_device(b.ravel()), c, M=M, N=N, K=K,
             a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1), alpha=0.75, bias=cuda.to_device(bias),
             residual=cuda.to_device(res.ravel()), workspace=ws)
    want = np.maximum(0.75 * (a.astype(np.float64) @ b) + bias + res, 0)
    assert_close(c.copy_to_host().reshape(M, N), want, "float32")
