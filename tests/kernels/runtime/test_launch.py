"""CompiledKernel / PreparedLaunch give what a direct numba launch gives (both paths; tiny shapes).

Arrays of several dtypes, strided views, scalars, tuples and records; pointer patching with ints,
ArgView tuples and ncudnn DeviceViews; argument checks.
"""
import numpy as np
import pytest
from numba import cuda
from numba.cuda import types
from numba.cuda.np import numpy_support

from ncudnn.kernels.runtime.launch import (ArgView, CompiledKernel, as_arg_view, dim3, stream_handle,
                                   typeof_arg)
from ncudnn.memory import as_view
from ncudnn.testing import poison_value, random


@cuda.jit
def _affine2d(x, out, a, b, flag):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        v = x[i, j] * a + b
        if flag:
            v = v + x[i, j]
        out[i, j] = v


def _to_dev(a):
    return cuda.to_device(a)


CASES = [(np.float32, types.float32), (np.float64, types.float64),
         (np.int32, types.int32), (np.int64, types.int64)]


@pytest.mark.parametrize("dtype,nbt", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_matches_direct_launch_strided(rng, dtype, nbt):
    big = (random(rng, (7, 9), np.float64, -20, 20)).astype(dtype)
    x_host = big[1::2, ::2]  # strided, non-contiguous view: shape (3, 5)
    a = dtype(rng.integers(2, 5))
    b = dtype(rng.integers(-3, 3))
    flag = bool(rng.integers(0, 2))
    ref = x_host.astype(np.float64) * a + b + (x_host if flag else 0)

    arr = types.Array(nbt, 2, "A")
    kern = CompiledKernel(_affine2d, types.void(arr, arr, nbt, nbt, types.boolean))
    dx = _to_dev(big)[1::2, ::2]
    out1 = _to_dev(np.full((3, 5), poison_value(dtype), dtype))
    out2 = _to_dev(np.full((3, 5), poison_value(dtype), dtype))

    kern.prepare((1, 2), (4, 4), (dx, out1, a, b, flag)).run()
    _affine2d[(1, 2), (4, 4)](dx, out2, a, b, flag)
    np.testing.assert_array_equal(out1.copy_to_host(), out2.copy_to_host())
    np.testing.assert_allclose(out1.copy_to_host().astype(np.float64), ref, rtol=1e-6)


@cuda.jit
def _axpy(x, y, out, n, alpha):
    i = cuda.grid(1)
    if i < n:
        out[i] = alpha * x[i] + y[i]


def test_prepared_run_patches_pointers(rng):
    n = 16
    xs = [random(rng, n) for _ in range(3)]
    ys = [random(rng, n) for _ in range(3)]
    alpha = np.float32(rng.uniform(0.5, 2.0))
    kern = CompiledKernel(_axpy, "void(float32[::1], float32[::1], float32[::1], int32, float32)")
    dxs, dys = [_to_dev(v) for v in xs], [_to_dev(v) for v in ys]
    outs = [_to_dev(np.full(n, np.nan, np.float32)) for _ in range(3)]
    pl = kern.prepare(1, n, (dxs[0], dys[0], outs[0], n, alpha))
    assert pl.n_ptrs == 3
    pl.run()
    # integers, ArgView tuples and DeviceViews: only the data pointer changes
    v1 = as_arg_view(outs[1])
    pl.run([as_arg_view(dxs[1]).ptr, tuple(as_arg_view(dys[1]))[:4], ArgView(v1.ptr, (n,), (4,), 4)])
    pl.run([as_view(dxs[2]), dys[2], outs[2]])
    for x, y, o in zip(xs, ys, outs):  # the GPU contracts alpha * x + y into one FMA: one rounding less
        np.testing.assert_allclose(o.copy_to_host(), alpha * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.sim_only
def test_sim_refuses_pointers_outside_live_memory(rng):
    """A pointer into a freed simulated array (or any host address never allocated as device memory) is an
    error at launch, not a read or write of whatever the host heap holds there."""
    import gc
    kern = CompiledKernel(_axpy, "void(float32[::1], float32[::1], float32[::1], int32, float32)")
    d = _to_dev(random(rng, 8))
    freed = _to_dev(random(rng, 8))
    ptr = as_arg_view(freed).ptr
    del freed
    gc.collect()
    with pytest.raises(ValueError, match="not inside a live simulated device allocation"):
        kern.prepare(1, 8, (d, d, ArgView(ptr, (8,), (4,), 4), 8, np.float32(1))).run()
    stray = np.zeros(8, np.float32)     # host memory no device array owns
    with pytest.raises(ValueError, match="not inside a live simulated device allocation"):
        kern.prepare(1, 8, (d, d, ArgView(stray.ctypes.data, (8,), (4,), 4), 8, np.float32(1))).run()
    kern.prepare(1, 8, (d, d, d, 8, np.float32(1))).run()     # live memory still runs


def test_run_checks_pointer_count(rng):
    kern = CompiledKernel(_axpy, "void(float32[::1], float32[::1], float32[::1], int32, float32)")
    d = _to_dev(random(rng, 4))
    pl = kern.prepare(1, 4, (d, d, d, 4, np.float32(1)))
    with pytest.raises(ValueError, match="3 pointer"):
        pl.run([d, d])


@cuda.jit
def _axpy64(x, y, out, n, alpha):
    i = cuda.grid(1)
    if i < n:
        out[i] = alpha * x[i] + y[i]


def test_signature_from_first_call(rng):
    """A kernel never compiled before takes its signature from the first call's arguments."""
    n = 8
    x, y = random(rng, n, np.float64), random(rng, n, np.float64)
    out = _to_dev(np.full(n, np.nan))
    kern = CompiledKernel(_axpy64)
    kern[1, n](_to_dev(x), _to_dev(y), out, n, 1.5)
    assert kern.argtypes == (types.Array(types.float64, 1, "C"),) * 3 + (types.int64, types.float64)
    np.testing.assert_allclose(out.copy_to_host(), 1.5 * x + y, rtol=1e-12)


def test_argument_checks():
    kern = CompiledKernel(_axpy, "void(float32[::1], float32[::1], float32[::1], int32, float32)")
    d2 = _to_dev(np.zeros((2, 4), np.float32))
    d1 = _to_dev(np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="ndim"):
        kern.prepare(1, 4, (d2, d1, d1, 4, 1.0))
    with pytest.raises(TypeError, match="itemsize"):
        kern.prepare(1, 4, (_to_dev(np.zeros(8)), d1, d1, 4, 1.0))
    with pytest.raises(TypeError, match="contiguous"):
        kern.prepare(1, 4, (d1[::2], d1, d1, 4, 1.0))
    with pytest.raises(TypeError, match="arguments"):
        kern.prepare(1, 4, (d1, d1))


@cuda.jit
def _tuple_kernel(m, out, scale):
    a, n, stride = m
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i * stride] * scale


def test_tuple_arguments(rng):
    """gemm-style (array, size, stride) tuples are flattened member by member."""
    x = random(rng, 12)
    n, stride = 4, 3
    sig = types.void(types.Tuple((types.Array(types.float32, 1, "C"), types.int64, types.int64)),
                     types.Array(types.float32, 1, "C"), types.float32)
    kern = CompiledKernel(_tuple_kernel, sig)
    out = _to_dev(np.full(n, np.nan, np.float32))
    pl = kern.prepare(1, n, ((_to_dev(x), n, stride), out, np.float32(2.0)))
    assert pl.n_ptrs == 2
    pl.run()
    np.testing.assert_allclose(out.copy_to_host(), 2.0 * x[::3][:n], rtol=1e-6)
    x2 = random(rng, 12)
    pl.run([_to_dev(x2), out])
    np.testing.assert_allclose(out.copy_to_host(), 2.0 * x2[::3][:n], rtol=1e-6)


REC = np.dtype([("w", np.float64), ("k", np.int32)], align=True)


@cuda.jit
def _record_kernel(x, out, r):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * r.w + r.k


def test_record_argument(rng):
    x = random(rng, 8, np.float64)
    rec = np.zeros(1, REC)
    rec[0]["w"], rec[0]["k"] = rng.uniform(1, 2), rng.integers(1, 9)
    sig = types.void(types.float64[::1], types.float64[::1], numpy_support.from_dtype(REC))
    kern = CompiledKernel(_record_kernel, sig)
    out = _to_dev(np.full(8, np.nan))
    pl = kern.prepare(1, 8, (_to_dev(x), out, rec[0]))
    pl.run()
    np.testing.assert_allclose(out.copy_to_host(), x * rec[0]["w"] + rec[0]["k"], rtol=1e-12)


def test_typeof_and_helpers():
    assert typeof_arg(3) == types.int64 and typeof_arg(2.0) == types.float64
    assert typeof_arg(True) == types.boolean and typeof_arg(np.float32(1)) == types.float32
    assert typeof_arg((1, 2)) == types.UniTuple(types.int64, 2)
    v = ArgView(4096, (3, 4), (4, 12), 4, np.dtype(np.float32))  # column-major
    assert typeof_arg(v) == types.Array(types.float32, 2, "F")
    assert typeof_arg(ArgView(4096, (3, 4), (32, 4), 4, np.float32)) == types.Array(types.float32, 2, "A")
    with pytest.raises(TypeError, match="dtype"):
        typeof_arg((4096, (3,), (4,), 4))
    assert dim3(5) == (5, 1, 1) and dim3((2, 3)) == (2, 3, 1)

    class TorchLike:
        cuda_stream = 1234

    class Proto:
        def __cuda_stream__(self):
            return (0, 777)

    class NumbaLike:
        handle = 99

    assert stream_handle(None) == 0 and stream_handle(5) == 5
    assert stream_handle(TorchLike()) == 1234 and stream_handle(Proto()) == 777
    assert stream_handle(NumbaLike()) == 99


class _TorchLike:
    """The parts of a torch tensor the launcher reads (data_ptr / stride in elements / element_size).

    It wraps a device array (so a real GPU reads device memory); ``arr`` is a strided view of one."""

    def __init__(self, arr):
        self._arr, self.shape, self.dtype, self.is_cuda = arr, arr.shape, f"torch.{arr.dtype.name}", True

    def data_ptr(self):
        host = getattr(self._arr, "_ary", None)  # the simulator's device array wraps a NumPy array
        return (host.__array_interface__ if host is not None else self._arr.__cuda_array_interface__)["data"][0]

    def stride(self):
        return tuple(s // self._arr.dtype.itemsize for s in self._arr.strides)

    def element_size(self):
        return self._arr.dtype.itemsize  # numba's GPU DeviceNDArray has no .itemsize


def test_torch_like_tensors(rng):
    big = random(rng, (6, 10), np.float64)
    x = _TorchLike(_to_dev(big)[::2, 1::3])  # strided (3, 3) view of device memory
    out = _to_dev(np.full((3, 3), np.nan))
    v = as_arg_view(x)
    assert v.strides == (160, 24) and v.dtype == np.float64
    assert typeof_arg(x) == types.Array(types.float64, 2, "A")
    kern = CompiledKernel(_affine2d)
    kern.prepare(1, (4, 4), (x, _TorchLike(out), 2.0, 0.5, False)).run()
    np.testing.assert_allclose(out.copy_to_host(), big[::2, 1::3] * 2.0 + 0.5, rtol=1e-12)
