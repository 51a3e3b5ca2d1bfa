"""Softmax / log-softmax with NaN and infinities, against the float64 oracle computed the straightforward
way (m = max x, exp(x - m) / sum exp(x - m)): a NaN or a +inf anywhere in a slice makes the whole slice NaN
(IEEE, as cuDNN), a -inf entry (a masked element) gives 0 (log: -inf) there and a normal result elsewhere,
a slice of only -inf gives NaN. Every config the softmax_fused engine keeps (register, warp, shared-memory,
online, 16-byte vector and persistent kernels; rows and columns), the backward kernels, every engine config
the heuristics return through the API, and the legacy cudnnSoftmaxForward / cudnnSoftmaxBackward (fused and
unfused). The special values sit at random positions of fresh random data; outputs are poisoned with a
finite sentinel first (a NaN poison could not tell a missing write from a NaN result)."""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.engines import api, registry
from ncudnn.ir.partition import Subgraph, partition
from ncudnn.kernels.softmax import axis as ksm
from ncudnn.kernels.primitives.warp import SIM
from ncudnn.testing import assert_close, size
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnStatus_t as S

import membound_util as U
from test_softmax_engine import bwd_graph, fwd_graph

SENTINEL = -12345.0
ALGOS = ["accurate", "fast", "log"]


def special_rows(rng, rows, n):
    """(rows, n) data in [-4, 4): row 0 one NaN, row 1 one +inf, row 2 a few -inf, row 3 all -inf,
    row 4 a NaN and a +inf, row 5 -inf and +inf, the rest finite; positions random."""
    a = rng.uniform(-4, 4, (rows, n))
    a[0, rng.integers(n)] = np.nan
    a[1, rng.integers(n)] = np.inf
    a[2, rng.choice(n, size=max(1, n // 5), replace=False)] = -np.inf
    a[3, :] = -np.inf
    a[4, rng.choice(n, size=2, replace=False)] = (np.nan, np.inf)
    a[5, rng.choice(n, size=2, replace=False)] = (-np.inf, np.inf)
    return a


def sentinel(desc):
    dt = np.dtype(U.NP[desc.dtype])
    return cuda.to_device(np.full(U._span(desc.dims, desc.strides), SENTINEL, dt))


def oracle(a, axes, log):
    return R.log_softmax(a, axes) if log else R.softmax(a, axes)


def test_the_oracle_is_ieee():
    """The oracle itself: NaN / +inf poison the slice, -inf entries give 0, an all -inf slice NaN."""
    a = np.array([[1.0, np.nan, 2.0], [1.0, np.inf, 2.0], [1.0, -np.inf, 2.0], [-np.inf] * 3])
    y, ly = R.softmax(a, 1), R.log_softmax(a, 1)
    assert np.isnan(y[:2]).all() and np.isnan(ly[:2]).all() and np.isnan(y[3]).all() and np.isnan(ly[3]).all()
    e = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    assert y[2, 1] == 0.0 and ly[2, 1] == -np.inf and np.allclose(y[2, [0, 2]], e)
    assert np.allclose(ly[2, [0, 2]], np.log(e))


#: the simulator runs a Python thread per CUDA thread: there, one config per kernel, block size and use of
#: shared memory, of blocks up to this many threads (larger blocks repeat the code paths), and the default;
#: on a GPU every config
SIM_MAX_THREADS = 256


def _engine_configs(g):
    eng = registry.by_name("softmax_fused")
    sub = Subgraph(kind="softmax", nodes=list(g.nodes))
    ctx = api.context()
    st, why = eng.check_support(sub, ctx)
    assert st == S.CUDNN_STATUS_SUCCESS, why
    cfgs = list(eng.configs(sub, ctx))
    if SIM:   # one config per (kernel, threads, shared memory or not), blocks up to SIM_MAX_THREADS
        first, picked = eng.default_config(sub), {}
        for c in cfgs:
            st = eng._step(sub, c)
            if c == first or _threads(st.block) <= SIM_MAX_THREADS:
                picked.setdefault((st.key.split(":")[0], _threads(st.block), st.shared > 0, c == first), c)
        cfgs = list(picked.values())
    return eng, sub, ctx, cfgs


def _threads(block):
    return int(np.prod(block)) if isinstance(block, tuple) else int(block)


def _run_cfg(eng, sub, ctx, cfg, arrays, descs):
    plan = eng.build(sub, cfg, ctx)
    views = {t.uid: ncudnn.memory.as_view(arrays[t.uid], dims=t.dims, strides=t.strides, dtype=t.dtype)
             for t in descs}
    plan.prepare(views, None)(0)


# rows of registers / warps (48), of the online, shared-memory, vector-online and persistent kernels (1100)
ROWS = [(8, 48), (6, 1100)]


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("rows,n", ROWS, ids=["short", "long"])
def test_forward_rows_every_engine_config(rng, algo, rows, n):
    dims = (rows, n)
    g, x, y = fwd_graph(dims, (rows, 1), algo=algo)
    eng, sub, ctx, cfgs = _engine_configs(g)
    assert cfgs
    keys = set()
    for cfg in cfgs:
        a = special_rows(rng, rows, n)
        out = sentinel(y)
        _run_cfg(eng, sub, ctx, cfg, {1: U.upload(a, x), 2: out}, [x, y])
        keys.add(eng._step(sub, cfg).key.split(":")[0])
        assert_close(U.download(out, y), oracle(a, (1,), algo == "log"), "float32", name=f"y {cfg}")
    if n == 1100:   # the long rows reach every forward row kernel
        assert {"softmax_fwd", "softmax_fwd_vec", "softmax_persist"} <= keys, keys


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("path", ["shared_memory_rows", "vector_online_blocks"])
def test_forward_kernel_paths_no_engine_config_reaches(rng, log, path):
    """Kernel paths no BLOCK_SIZE of the engine selects at simulator shapes: the shared-memory row kernel
    (64 threads) and the vector online path with a block-level pair combine (128 threads)."""
    rows, n = 6, 1100
    a = special_rows(rng, rows, n)
    x, y = cuda.to_device(a.astype(np.float32)), cuda.to_device(np.full((rows, n), SENTINEL, np.float32))
    if path == "shared_memory_rows":
        assert ksm._fwd_kernel(rows, n, 1, log, 64, "float32", "float32")[1][2] > 0
        ksm.softmax_forward(x, y, rows, n, 1, log=log, block=64)
    else:
        ksm.softmax_forward(x, y, rows, n, 1, log=log, block=128, vec=4, online=True)
    assert_close(y.copy_to_host(), oracle(U.cast(a, U.F32), (1,), log), "float32")


@pytest.mark.parametrize("algo", ALGOS)
def test_forward_columns_every_engine_config(rng, algo):
    """CHANNEL mode of NCHW (softmax over C, H*W inner): the column kernel; fp16 I/O too."""
    dims, stats = (6, 5, 3, 2), (6, 1, 3, 2)
    for dtype in (U.F32, U.DT.CUDNN_DATA_HALF):
        g, x, y = fwd_graph(dims, stats, dtype=dtype, algo=algo)
        eng, sub, ctx, cfgs = _engine_configs(g)
        for cfg in cfgs:
            a = np.moveaxis(special_rows(rng, 6 * 3 * 2, 5).reshape(6, 3, 2, 5), 3, 1)
            out = sentinel(y)
            _run_cfg(eng, sub, ctx, cfg, {1: U.upload(a, x), 2: out}, [x, y])
            assert_close(U.download(out, y), oracle(U.cast(a, x.dtype), (1,), algo == "log"), U.TOLNAME[dtype],
                         name=f"y {cfg}")


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("rows,n", ROWS, ids=["short", "long"])
def test_backward_every_engine_config(rng, log, rows, n):
    """dx from a y holding NaN / inf (the forward of special rows) and finite dy: the sums carry them."""
    g, yt, dyt, dxt = bwd_graph((rows, n), (rows, 1), log)
    eng, sub, ctx, cfgs = _engine_configs(g)
    for cfg in cfgs:
        ya = U.cast(oracle(special_rows(rng, rows, n), (1,), log), U.F32)
        ya[rows - 1, rng.integers(n)] = np.nan       # and a NaN in an otherwise normal row of y
        da = rng.uniform(-1, 1, (rows, n))
        out = sentinel(dxt)
        _run_cfg(eng, sub, ctx, cfg, {1: U.upload(ya, yt), 2: U.upload(da, dyt), 3: out}, [yt, dyt, dxt])
        with np.errstate(invalid="ignore"):
            ref = R.softmax_backward(ya, da, (1,), log=log)
        assert_close(U.download(out, dxt), ref, "float32", name=f"dx {cfg}")


@pytest.mark.parametrize("algo", ["accurate", "log"])
def test_through_the_api_every_heuristics_config(rng, algo):
    """Every engine config the heuristics return (modes A and FALLBACK), built and executed (in the
    simulator the first two of each mode: the engine-config tests above cover the kernels)."""
    rows, n = 6, 1100
    g, x, y = fwd_graph((rows, n), (rows, 1), algo=algo)
    seen = set()
    for mode in (HM.CUDNN_HEUR_MODE_A, HM.CUDNN_HEUR_MODE_FALLBACK):
        ecs = api.get_heuristics(g, mode)
        for ec in ecs[:2] if SIM else ecs:
            if ec.ident() in seen:
                continue
            seen.add(ec.ident())
            a = special_rows(rng, rows, n)
            out = sentinel(y)
            U.run_ec(g, {1: U.upload(a, x), 2: out}, ec)
            assert_close(U.download(out, y), oracle(a, (1,), algo == "log"), "float32", name=f"y {ec}")
    assert seen


SHAPE = size((6, 7, 3, 2), (64, 32, 16, 16))


def _legacy_input(rng, mode):
    if mode == ncudnn.CUDNN_SOFTMAX_MODE_INSTANCE:
        return special_rows(rng, SHAPE[0], int(np.prod(SHAPE[1:]))).reshape(SHAPE).astype(np.float32)
    n, c, h, w = SHAPE
    return np.ascontiguousarray(np.moveaxis(special_rows(rng, n * h * w, c).reshape(n, h, w, c), 3, 1),
                                np.float32)


def _tdesc(dims):
    st, d = L.cudnnCreateTensorDescriptor()
    assert st == 0 and L.cudnnSetTensor4dDescriptor(d, 0, ncudnn.CUDNN_DATA_FLOAT, *dims)[0] == 0
    return d


@pytest.fixture
def handle():
    st, h = ncudnn.cudnnCreate()
    assert st == S.CUDNN_STATUS_SUCCESS
    yield h
    ncudnn.cudnnDestroy(h)


@pytest.mark.parametrize("unfused", [False, True], ids=["fused", "unfused"])
@pytest.mark.parametrize("algo", list(ncudnn.cudnnSoftmaxAlgorithm_t), ids=lambda a: a.name)
@pytest.mark.parametrize("mode", list(ncudnn.cudnnSoftmaxMode_t), ids=lambda m: m.name)
def test_legacy_forward_backward(handle, rng, monkeypatch, algo, mode, unfused):
    """cudnnSoftmaxForward / Backward, on the fused engine or (it refusing) reductions + pointwise."""
    if unfused:
        monkeypatch.setattr(type(registry.by_name("softmax_fused")), "check_support",
                            lambda self, sub, ctx: (S.CUDNN_STATUS_NOT_SUPPORTED, "refused for this test"))
    axis = (1, 2, 3) if mode == ncudnn.CUDNN_SOFTMAX_MODE_INSTANCE else 1
    log = algo == ncudnn.CUDNN_SOFTMAX_LOG
    x = _legacy_input(rng, mode)
    y = cuda.to_device(np.full(SHAPE, SENTINEL, np.float32))
    assert L.cudnnSoftmaxForward(handle, algo, mode, 1.0, _tdesc(SHAPE), cuda.to_device(x), 0.0, _tdesc(SHAPE),
                                 y) == (S.CUDNN_STATUS_SUCCESS,), ncudnn.cudnnGetLastErrorString()
    ref = oracle(x, axis, log)
    assert_close(y.copy_to_host(), ref, 1e-5, name="y")
    yv, dy = ref.astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    dx = cuda.to_device(np.full(SHAPE, SENTINEL, np.float32))
    assert L.cudnnSoftmaxBackward(handle, algo, mode, 1.0, _tdesc(SHAPE), cuda.to_device(yv), _tdesc(SHAPE),
                                  cuda.to_device(dy), 0.0, _tdesc(SHAPE), dx) == (S.CUDNN_STATUS_SUCCESS,)
    with np.errstate(invalid="ignore"):
        assert_close(dx.copy_to_host(), R.softmax_backward(yv, dy, axis, log=log), 1e-5, name="dx")


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["accurate", "log"])
def test_gpu_8192x1024_every_heuristics_config(rng, algo):
    """The H200 shape: 8192 rows of 1024 with the special rows spread over the batch."""
    rows, n = 8192, 1024
    g, x, y = fwd_graph((rows, n), (rows, 1), algo=algo)
    for ec in api.get_heuristics(g, HM.CUDNN_HEUR_MODE_A):
        a = rng.uniform(-4, 4, (rows, n))
        for r in rng.choice(rows, size=64, replace=False).reshape(8, 8).T:
            a[r] = special_rows(rng, 8, n)[:len(r)]
        out = sentinel(y)
        U.run_ec(g, {1: U.upload(a, x), 2: out}, ec)
        assert_close(U.download(out, y), oracle(a, (1,), algo == "log"), "float32", name=f"y {ec}")


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("n", [1024, 32768, 65536])
def test_gpu_every_engine_config(rng, algo, n):
    """Every config the engine keeps at 8192 x 1024, and long rows (the persistent, shared-memory and
    online kernels)."""
    rows = {1024: 8192, 32768: 256, 65536: 64}[n]
    g, x, y = fwd_graph((rows, n), (rows, 1), algo=algo)
    eng, sub, ctx, cfgs = _engine_configs(g)
    base = special_rows(rng, rows, n)
    for cfg in cfgs:
        out = sentinel(y)
        _run_cfg(eng, sub, ctx, cfg, {1: U.upload(base, x), 2: out}, [x, y])
        assert_close(U.download(out, y), oracle(base, (1,), algo == "log"), "float32", name=f"y {cfg}")
