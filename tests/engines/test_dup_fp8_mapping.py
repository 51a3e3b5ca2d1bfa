"""matmul_common.matmul_mapping(sub, fp8=True) takes FP8 A / B / output as they are: the FP8 mapping of
matmul_tc_fp8 built on it without relabelling FP8 tensors as BF16 (``_direct`` below, the form
matmul_tc_fp8.fp8_mapping can take) equals fp8_mapping's on every FP8 graph pattern; without ``fp8``
FP8 is still refused, naming the port. No kernels run."""
import copy
import dataclasses

import pytest

from ncudnn.engines import api
from ncudnn.engines import gemm_common as gc
from ncudnn.engines.matmul_common import FP8_DTYPES, matmul_mapping
from ncudnn.engines.matmul_tc_fp8 import FP8, _device_scalar, fp8_mapping
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


def _direct(sub):
    """fp8_mapping on matmul_mapping(fp8=True): no BF16 stand-ins, nothing put back afterwards."""
    node = sub.anchor
    last = sub.epilogue[-1] if sub.epilogue else node
    out = next(iter(last.outputs.values()))
    ins = [p for p in ("A", "B") if gc.kdtype(node.inputs[p]) in FP8]
    if not ins and not (gc.kdtype(out) in FP8 and not out.is_virtual):
        return None
    anchor, epilogue, dscales = copy.copy(node), list(sub.epilogue), []
    cur = next(iter(node.outputs.values()))
    while ins and epilogue and cur.is_virtual:
        t = _device_scalar(epilogue[0], cur.uid)
        if t is None:
            break
        dscales.append(t)
        cur = next(iter(epilogue.pop(0).outputs.values()))
        anchor.outputs = {"C": cur}
    proxy = dataclasses.replace(sub, anchor=anchor, epilogue=epilogue,
                                nodes=[anchor] + epilogue + ([sub.tail] if sub.tail is not None else []))
    if hasattr(sub, "materialize"):
        proxy.materialize = sub.materialize
    p = matmul_mapping(proxy, fp8=True)
    p.dscales = tuple(dscales)
    return p


def _fields(p):
    e = p.epi
    return (p.M, p.N, p.K, p.batch, p.nb, p.A.uid, p.A.dtype, p.B.uid, p.B.dtype, p.a_strides, p.b_strides,
            p.c_strides, p.bias_strides, p.res_strides, p.alpha, p.beta, p.dtypes, p.fp64, p.a_layout, p.b_layout,
            p.in_bytes, p.out_bytes, p.extra_bytes, tuple(t.uid for t in p.dscales), e.spec, e.out.uid,
            e.out.dtype, e.bias.uid if e.bias is not None else None, e.bias_axis,
            e.residual.uid if e.residual is not None else None, e.alpha_scalars, e.const_scalars)


@pytest.mark.parametrize("a_dt,b_dt,out_dt", [(E4, E4, E4), (E5, E4, BF16), (E4, E5, F32), (E5, E5, E5),
                                               (BF16, BF16, E4), (E4, E4, BF16)])
@pytest.mark.parametrize("shape", [dict(), dict(device_scales=2), dict(device_scales=3, bias_relu=True),
                                   dict(bias_relu=True), dict(nsteps=0)])
def test_dup_fp8_mapping_without_relabel(a_dt, b_dt, out_dt, shape):
    sub = _graph(a_dt, b_dt, out_dt, **shape)
    try:
        want = fp8_mapping(sub)
    except gc.Reject as e:              # device scales fold only after FP8 inputs: both refuse alike
        assert shape.get("device_scales") and (a_dt, b_dt) == (BF16, BF16)
        with pytest.raises(gc.Reject) as got:
            _direct(sub)
        assert (got.value.status, got.value.reason) == (e.status, e.reason)
        return
    got = _direct(sub)
    assert want is not None and got is not None
    assert _fields(got) == _fields(want)
    assert got.dtypes[:3] == (gc.kdtype(sub.anchor.inputs["A"]), gc.kdtype(sub.anchor.inputs["B"]),
                              gc.kdtype(next(iter((sub.epilogue[-1] if sub.epilogue else sub.anchor)
                                                  .outputs.values()))))


def test_dup_fp8_mapping_refused_without_the_flag():
    sub = _graph(E4, E4, BF16, nsteps=1)
    with pytest.raises(gc.Reject, match=r"node 'mm': A: data type .* is not one of"):
        matmul_mapping(sub)
    assert set(FP8_DTYPES) == set(FP8)
    assert _direct(_graph(BF16, BF16, F32)) is None and fp8_mapping(_graph(BF16, BF16, F32)) is None
