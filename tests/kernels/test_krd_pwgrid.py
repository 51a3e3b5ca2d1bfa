"""pointwise_fused grid-stride grids sized by the compiled kernel's resident blocks (registers)."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ncudnn.engines import pointwise as EP
from ncudnn.kernels import pointwise as kpw
from ncudnn.kernels import primitives
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
