"""pointwise_fused grid-stride grids sized by the compiled kernel's resident blocks (registers)."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ncudnn.engines.pointwise import fused as EP
from ncudnn.kernels.pointwise import fused as kpw
from ncudnn.kernels.primitives import warp as primitives
from ncudnn.types import cudnnPointwiseMode_t as PM

SHAPE = (8192, 4096)


def _meta(block, unroll, waves, shape=SHAPE):
    x = kpw.TensorSpec("float32", kpw.contiguous_strides(shape))
    b = kpw.TensorSpec("float32", (0, 1))
    spec = kpw.PointwiseSpec(shape, (x, b), (kpw.NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
                                             kpw.NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
                             (kpw.OutputSpec(3, "float32", kpw.contiguous_strides(shape)),),
                             block=block, unroll=unroll, vec=4, waves=waves)
    return kpw.PointwiseKernel(spec, None, None)


@pytest.mark.parametrize("block, regs, per_sm", [(128, 40, 12), (128, 32, 16), (256, 64, 4), (512, 30, 4),
                                                 (1024, 72, 0)])
def test_krd_resident_grid_counts_registers(monkeypatch, block, regs, per_sm):
    monkeypatch.setattr(primitives, "sm_count", lambda: 132)
    meta = _meta(block, 2, 1)
    grid = EP.resident_grid(meta, SimpleNamespace(attrs={"regs": regs}))
    # per warp, registers come in 256s; a block that does not fit still gets one per SM
    assert grid == 132 * max(per_sm, 1)
    assert EP.resident_grid(replace_waves(meta, 3), SimpleNamespace(attrs={"regs": regs})) == 3 * 132 * max(per_sm, 1)


def replace_waves(meta, waves):
    return kpw.PointwiseKernel(replace(meta.spec, waves=waves), None, None)


def test_krd_resident_grid_uncapped_and_small():
    meta = _meta(128, 2, 0)           # waves 0: one trip a thread, whatever the registers
    assert EP.resident_grid(meta, SimpleNamespace(attrs={"regs": 40})) == meta.grid() == 8192 * 4096 // (128 * 2 * 4)
    small = _meta(128, 2, 1, shape=(4, 256))
    # never more blocks than the elements need (4 * 256 / (128 * 2 * 4) = 1)
    assert EP.resident_grid(small, SimpleNamespace(attrs={"regs": 40})) == 1
    assert EP.resident_grid(meta, SimpleNamespace(attrs={})) == meta.grid()   # simulator: no registers


def _graph(act_mode, dims=(6, 64, 1, 1)):
    from ncudnn.ir import OpGraph, Pointwise, TensorDesc, packed_strides
    from ncudnn.types import cudnnDataType_t as DT

    def t(uid, d, name, virtual=False):
        return TensorDesc(uid, d, packed_strides(d), DT.CUDNN_DATA_FLOAT, name=name, is_virtual=virtual)
    x, b, y = t(1, dims, "x"), t(2, (1, dims[1], 1, 1), "b"), t(3, dims, "y")
    v = TensorDesc(10, is_virtual=True, name="xb")
    return OpGraph([Pointwise("add", {"X": x, "B": b}, {"Y": v}, mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("act", {"X": v}, {"Y": y}, mode=act_mode)]).finalize()


@pytest.mark.parametrize("act, bounds", [(PM.CUDNN_POINTWISE_GELU_FWD, 12), (PM.CUDNN_POINTWISE_RELU_FWD, 0)])
def test_krd_heavy_dags_get_launch_bounds(rng, act, bounds):
    """bias + GELU (a transcendental) is built with launch bounds (128 threads, 12 blocks: 40 registers,
    every load of a trip issued first); bias + ReLU keeps the unbounded kernel. Both match the oracle."""
    import numpy as np
    from numba import cuda

    from ncudnn import reference as ref
    from ncudnn.engines import api
    from ncudnn.testing import assert_close

    g = _graph(act)
    ec = api.get_heuristics(g)[0]
    plan = api.build_plan(g, ec)
    (part,) = plan.parts
    assert part.meta.spec.vec == 4 and part.meta.spec.block == 128 and part.meta.spec.min_blocks == bounds
    x = (rng.standard_normal((6, 64, 1, 1)) * 2).astype(np.float32)
    b = rng.standard_normal((1, 64, 1, 1)).astype(np.float32)
    out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    api.execute(plan, {1: cuda.to_device(x.reshape(-1)), 2: cuda.to_device(b.reshape(-1)), 3: out})
    want = ref.pointwise(act, x.astype(np.float64) + b.astype(np.float64))
    assert_close(out.copy_to_host().reshape(x.shape), want, 1e-6)
