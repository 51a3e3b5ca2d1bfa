"""The vector row kernel's automatic choices on an H200-like device (132 SMs) at the bench's issue-4
shapes are the H200 measurements' winners (experiments/probe_reduce.py), and the reduction engine ranks
that automatic config first."""
import pytest

from ncudnn.engines import api
from ncudnn.ir import OpGraph, Reduction, TensorDesc, packed_strides
from ncudnn.kernels.reduce import spec as krs, strided as kr
from ncudnn.kernels.pointwise.fused import contiguous_strides as cs
from ncudnn.types import cudnnDataType_t as DT, cudnnReduceTensorOp_t as RO

R, C = 8192, 32768


@pytest.fixture
def h200(monkeypatch):
    monkeypatch.setattr(kr, "SIM", False)
    monkeypatch.setattr(krs, "SIM", False)
    monkeypatch.setattr(krs, "_sm_count", lambda: 132)


@pytest.mark.parametrize("shape, out, want", [
    ((R, C), (R, 1), (512, 1, 1, 4)),        # row sums: a 512-thread block per row, no split
    ((R, C), (1, 1), (256, 1, 1024, 4)),     # whole tensor: 256-thread blocks, 8 an SM (1024 cap)
    ((4 * 132, 65536), (4 * 132, 1), (512, 1, 1, 4)),   # rows fill the GPU: no split
])
def test_krd_auto_choice(h200, shape, out, want):
    spec = kr.reduce_spec(RO.CUDNN_REDUCE_TENSOR_AMAX, shape, "float32", cs(shape), out, "float32", cs(out),
                          vec=0)
    kept, red = krs.layout(spec)
    assert kr.vec_width(spec, kept, red) == 4
    assert krs.choose_vec(spec, kept, red, 4) == want


@pytest.mark.parametrize("xd, yd", [((R, C, 1, 1), (R, 1, 1, 1)), ((R, C, 1, 1), (1, 1, 1, 1)),
                                    ((C, R, 1, 1), (1, R, 1, 1))])
def test_krd_engine_ranks_auto_first_at_bench_shapes(h200, xd, yd):
    x = TensorDesc(1, xd, packed_strides(xd), DT.CUDNN_DATA_FLOAT, name="x")
    y = TensorDesc(2, yd, packed_strides(yd), DT.CUDNN_DATA_FLOAT, name="y")
    g = OpGraph([Reduction("red", {"X": x}, {"Y": y}, mode=RO.CUDNN_REDUCE_TENSOR_ADD)]).finalize()
    first = api.get_heuristics(g)[0].config
    assert first.engine == "reduction" and all(v == 0 for _, v in first.knobs)
