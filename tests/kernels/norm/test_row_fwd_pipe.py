"""Persistent cp.async-pipelined row norm forward (ncudnn.kernels.norm.row_fwd_pipe) vs the float64 oracle."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.primitives import l2hint
from ncudnn.kernels.norm import row_fwd_pipe as kp
from ncudnn.kernels.runtime.dtypes import placeholder
from ncudnn.kernels.runtime.launch import CompiledKernel
from ncudnn.testing import assert_close, size


def _poisoned(n):
    return cuda.to_device(np.full(n, np.nan, np.float32))


def _run(rng, rows, n, warps, stages, grid, rms=False, bias_on=True, stats_on=True, eps_array=False,
         stats="shift", params="smem", cs=False, hint=None):
    x = (rng.standard_normal((rows, n)) * 2 + 3.0).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    eps = 1e-5
    kern, _ = kp.row_fwd_pipe_kernel(n, warps, stages, not rms, bias_on, stats_on,
                                     eps_dt="float32" if eps_array else None, stats=stats, params=params, cs=cs,
                                     hint=hint)
    y = _poisoned(rows * n)
    mean = _poisoned(rows) if stats_on and not rms else placeholder("float32")
    inv = _poisoned(rows) if stats_on else placeholder("float32")
    shared = kp.pipe_shared_bytes(n, warps, stages, bias_on, params)
    eps_arg = cuda.to_device(np.array([eps], np.float32)) if eps_array else eps
    args = (cuda.to_device(x.reshape(-1)), cuda.to_device(scale),
            cuda.to_device(bias) if bias_on else placeholder("float32"), y, mean, inv, eps_arg, rows)
    # through CompiledKernel: it opts in to > 48 KB of dynamic shared memory on a GPU
    CompiledKernel(kern).prepare(grid, warps * 32, args, shared).run(None, 0)
    b = bias if bias_on else None
    if rms:
        ey, einv = ref.rmsnorm_forward(x, scale, eps, norm_axes=1, bias=b)
    else:
        ey, emean, einv = ref.layernorm_forward(x, scale, b if b is not None else np.zeros(n), eps, norm_axes=1)
        if stats_on:
            assert_close(mean.copy_to_host().reshape(rows, 1), emean, "float32", name="mean")
    assert_close(y.copy_to_host().astype(np.float64).reshape(rows, n), ey, "float32", name="y")
    if stats_on:
        assert_close(inv.copy_to_host().reshape(rows, 1), einv, "float32", name="inv_std")


# (rows, n, warps, stages, grid, stats, params, cs): rows never a multiple of grid * warps
CASES = [(9, 128, 2, 2, 2, "shift", "smem", False),
         (11, 256, 2, 2, 1, "two", "smem", True),
         (10, 128, 2, 3, 2, "chan", "smem", False),
         (9, 256, 2, 2, 2, "shift", "regs", False)]


@pytest.mark.parametrize("rows,n,warps,stages,grid,stats,params,cs", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_nrp_forward(rng, rows, n, warps, stages, grid, stats, params, cs, rms):
    _run(rng, rows, n, warps, stages, grid, rms, stats=stats, params=params, cs=cs)


@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_nrp_no_bias_eps_array(rng, rms):
    _run(rng, 7, 128, 2, 2, 2, rms, bias_on=False, eps_array=True)


def test_nrp_no_stats(rng):
    _run(rng, 5, 128, 1, 2, 2, bias_on=True, stats_on=False)


def test_nrp_more_warps_than_rows(rng):
    _run(rng, 3, 128, 2, 2, 2)      # idle warps still meet the block barrier


def test_nrp_rejects():
    for n in (96, 1152, 0):
        with pytest.raises(ValueError):
            kp.row_fwd_pipe_kernel(n, 4, 2, True, True, True)
    for dt in ("bfloat16", "float16"):
        with pytest.raises(ValueError):
            kp.row_fwd_pipe_kernel(256, 4, 2, True, True, True, x_dt=dt, y_dt=dt)
    with pytest.raises(ValueError):
        kp.row_fwd_pipe_kernel(256, 4, 1, True, True, True)
    with pytest.raises(ValueError):
        kp.row_fwd_pipe_kernel(1024, 32, 2, True, True, True)     # 264 KB of shared memory
    with pytest.raises(TypeError):
        kp.row_fwd_pipe_kernel(256, 4, 2, True, True, True, copy="bulk")     # the bulk (TMA) mode is gone


def test_nrp_fits():
    assert kp.pipe_shared_bytes(1024, 8, 2, True) == 8 * 2 * 4096 + 8192
    assert kp.pipe_shared_bytes(1024, 4, 4, False, "regs") == 4 * 4 * 4096
    assert kp.pipe_fits(1024, 8, 2, 3)                 # 72 KB x 3: cuDNN's footprint
    assert kp.pipe_fits(1024, 4, 3, 4)                 # 56 KB x 4 + reserves = 228 KB exactly
    assert not kp.pipe_fits(1024, 8, 3, 3)
    assert kp.pipe_geometry(1024, 8, 2, 3, 132) == (396, 256, 73728)


def test_nrp_direct_launch(rng):
    """Through kernels.runtime.launch.CompiledKernel with the explicit signature (the probe's path)."""
    rows, n, warps, stages = 6, 128, 2, 2
    x = rng.standard_normal((rows, n)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    k = CompiledKernel(kp.row_fwd_pipe_kernel(n, warps, stages, True, True, True)[0], kp.signature())
    y, mean, inv = _poisoned(rows * n), _poisoned(rows), _poisoned(rows)
    grid, block, shared = kp.pipe_geometry(n, warps, stages, 1, 2)
    k.prepare(grid, block, (cuda.to_device(x.reshape(-1)), cuda.to_device(scale), cuda.to_device(bias), y, mean,
                            inv, 1e-5, rows), shared).run(None, 0)
    ey, emean, einv = ref.layernorm_forward(x, scale, bias, 1e-5, norm_axes=1)
    assert_close(y.copy_to_host().reshape(rows, n), ey, "float32", name="y")
    assert_close(mean.copy_to_host().reshape(rows, 1), emean, "float32", name="mean")
    assert_close(inv.copy_to_host().reshape(rows, 1), einv, "float32", name="inv_std")


def test_nrp_many_rows_a_warp(rng):
    """One warp, 23 rows: the two-slot ring wraps eleven times."""
    _run(rng, 23, 128, 1, 2, 1)


def test_nrp_l2_policy(rng):
    """x copied and y stored with the L2 evict-first policy (plain accesses in the simulator)."""
    _run(rng, 9, 128, 2, 2, 2, hint="evict_first")
    with pytest.raises(ValueError):
        kp.row_fwd_pipe_kernel(128, 2, 2, True, True, True, hint="evict_sometimes")
    with pytest.raises(ValueError):
        l2hint.cp16_l2("evict_sometimes")


@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
def test_nrp_bench_shape(rng, rms):
    """The benchmark's rows (8192 x 1024 on a GPU, persistent grid of 3 blocks an SM, 4 warps, 4 stages,
    evict-first); a small stand-in in the simulator."""
    from ncudnn.kernels.primitives.warp import sm_count
    rows, n, warps, stages, grid = size((13, 256, 2, 2, 2), (8192, 1024, 4, 4, 3 * sm_count()))
    _run(rng, rows, n, warps, stages, grid, rms, bias_on=not rms, hint="evict_first")
