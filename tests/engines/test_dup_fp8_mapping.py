"""matmul_common.matmul_mapping(sub, fp8=True) takes FP8 A / B / output as they are: the FP8 mapping of
matmul_tc_fp8.fp8_mapping built on it (no BF16 stand-ins) maps every FP8 graph pattern with the graph's own
dtypes, byte sizes and tensors; without ``fp8`` FP8 is still refused, naming the port. No kernels run."""

import pytest

from ncudnn.engines import api
from ncudnn.engines.gemm import common as gc
from ncudnn.engines.matmul.common import FP8_DTYPES, matmul_mapping
from ncudnn.engines.matmul.tc_fp8 import FP8, fp8_mapping
from ncudnn.ir import Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM

E4, E5 = DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E5M2
F32, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_BFLOAT16


def _t(uid, dims, dt, strides=None):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dt, name=f"t{uid}")


def _graph(a_dt, b_dt, out_dt, device_scales=0, bias_relu=False, nsteps=3):
    bsz, m, n, k = 2, 8, 16, 32
    a, b, out = _t(1, (bsz, m, k), a_dt), _t(2, (bsz, k, n), b_dt, (n * k, 1, k)), _t(4, (bsz, m, n), out_dt)
    mm = Matmul("mm", {"A": a, "B": b}, {"C": TensorDesc(10, is_virtual=True) if nsteps or bias_relu else out},
                compute_dtype=F32)
    nodes, cur = [mm], mm.outputs["C"]
    for i in range(nsteps):
        nxt = out if i == nsteps - 1 and not bias_relu else TensorDesc(11 + i, is_virtual=True)
        st = _t(5 + i, (1, 1, 1), F32) if i < device_scales else \
            TensorDesc(5 + i, (1, 1, 1), (1, 1, 1), F32, is_by_value=True, value=0.5, name=f"s{i}")
        nodes.append(Pointwise(f"scale{i}", {"X": cur, "B": st}, {"Y": nxt}, mode=PM.CUDNN_POINTWISE_MUL))
        cur = nxt
    if bias_relu:
        add = Pointwise("bias", {"X": cur, "B": _t(3, (1, 1, n), F32)}, {"Y": TensorDesc(20, is_virtual=True)},
                        mode=PM.CUDNN_POINTWISE_ADD)
        nodes += [add, Pointwise("relu", {"X": add.outputs["Y"]}, {"Y": out}, mode=PM.CUDNN_POINTWISE_RELU_FWD)]
    return api.problem(OpGraph(nodes).finalize())


@pytest.mark.parametrize("a_dt,b_dt,out_dt", [(E4, E4, E4), (E5, E4, BF16), (E4, E5, F32), (E5, E5, E5),
                                               (BF16, BF16, E4), (E4, E4, BF16)])
@pytest.mark.parametrize("shape", [dict(), dict(device_scales=2), dict(device_scales=3, bias_relu=True),
                                   dict(bias_relu=True), dict(nsteps=0)])
def test_dup_fp8_mapping_without_relabel(a_dt, b_dt, out_dt, shape):
    # fp8_mapping maps FP8 tensors as they are (matmul_mapping(fp8=True)): dtypes, byte sizes, the graph's own
    # A / B / output tensors, leading device scales folded only after FP8 inputs
    sub = _graph(a_dt, b_dt, out_dt, **shape)
    try:
        p = fp8_mapping(sub)
    except gc.Reject:
        assert shape.get("device_scales") and (a_dt, b_dt) == (BF16, BF16)
        return
    out = next(iter((sub.epilogue[-1] if sub.epilogue else sub.anchor).outputs.values()))
    names = tuple(gc.kdtype(t) for t in (sub.anchor.inputs["A"], sub.anchor.inputs["B"], out))
    assert p is not None and p.dtypes[:3] == names
    assert (p.M, p.N, p.K, p.batch) == (8, 16, 32, (1, 2))
    assert p.A is sub.anchor.inputs["A"] and p.B is sub.anchor.inputs["B"] and p.epi.out.uid == out.uid
    assert p.in_bytes == (1 if names[0] in FP8 else 2) and p.out_bytes == gc.bytes_of(names[2])
    fp8_in = names[0] in FP8 or names[1] in FP8
    assert len(p.dscales) == (shape.get("device_scales", 0) if fp8_in else 0)
    assert all(t.dims and all(d == 1 for d in t.dims) for t in p.dscales)


def test_dup_fp8_mapping_refused_without_the_flag():
    sub = _graph(E4, E4, BF16, nsteps=1)
    with pytest.raises(gc.Reject, match=r"node 'mm': A: data type .* is not one of"):
        matmul_mapping(sub)
    assert set(FP8_DTYPES) == set(FP8)
    assert fp8_mapping(_graph(BF16, BF16, F32)) is None
