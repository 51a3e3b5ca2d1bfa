"""Two or more broadcast vector operands of a GEMM-family epilogue fuse as one packed operand (issue #24):
conv -> MUL per-channel scale -> ADD per-channel bias -> ReLU (folded-BN inference), conv -> ADD -> MUL,
matmul -> MUL dequant [1,1,N] -> ADD [1,1,N], a one-element operand mixed with a per-channel one, three
operands, two one-element operands. The default plan is fused (no composite), every plan build_plans(ALL) returns matches the float64
oracle (poisoned output, fresh inputs); per-row mixed with per-column still gets the composite plan, the
fused engines' reason naming the node; the tensor-core engines refuse packed operands with a reason."""
import numpy as np
import pytest

import ncudnn as cudnn
from ncudnn.engines import registry
from ncudnn.engines.gemm import common as gc
from ncudnn.ir.partition import partition
from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.types import cudnnPointwiseMode_t as PM
from ncudnn.types import cudnnStatus_t as S

from test_epilogue_broadcast import build, check_fused, conv_graph, make_graph, run_and_check  # noqa: E402

DT = cudnn.data_type

PACKED = {
    "scale_bias_relu": [("mul", "vec", False), ("add", "vec", False), ("relu", None, None)],
    "bias_scale": [("add", "vec", False), ("mul", "vec", False)],
    "scalar_and_vec": [("mul", "scalar", False), ("add", "vec", False), ("relu", None, None)],
    "three": [("mul", "vec", False), ("sub", "vec", True), ("add", "vec", False)],
    "two_scalars": [("mul", "scalar", False), ("sub", "scalar", True)],
}
WHERE = ("conv_nhwc", "conv_nchw", "mm_fp32", "mm_fp16")
CASES = [(w, p) for w in WHERE for p in PACKED]
#: engines verified with packed operands (the rest refuse them)
SIMT = {"conv_implicit_gemm", "conv_implicit_precomp", "conv_direct", "conv_gemm_1x1",
        "conv_winograd_nonfused", "conv_winograd_fused", "matmul_simt", "matmul_small"}


def make(where, pattern):
    return make_graph(where, PACKED[pattern])


@pytest.mark.parametrize("where,pattern", CASES)
def test_default_plan_fuses(where, pattern, rng):
    g, Y, io = make(where, pattern)
    names = build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
    check_fused(names)
    run_and_check(g, Y, rng, [0], io)


@pytest.mark.parametrize("where,pattern", [(w, "scale_bias_relu") for w in WHERE] +
                         [("conv_nchw", "three"), ("mm_fp16", "scalar_and_vec"), ("conv_nhwc", "bias_scale"),
                          ("conv_nhwc1x1", "scale_bias_relu"), ("conv_nchw1x1", "three")])
def test_every_plan_runs(where, pattern, rng):
    g, Y, io = make(where, pattern)
    names = build(g, cudnn.build_plan_policy.ALL)
    check_fused(names)
    run_and_check(g, Y, rng, sorted(g._built), io)


def _sub(g):
    subs = [s for s in partition(g.ir)[0] if s.kind in ("conv_fprop", "matmul")]
    assert len(subs) == 1
    return subs[0]


def test_mixed_axes_get_the_composite_plan_and_a_reason(rng):
    g, Y, io = make_graph("mm_fp32", [("mul", "vec", False), ("add", "row", False)])
    names = build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
    assert all("composite" in n for n in names), names
    run_and_check(g, Y, rng, [0], io)
    sub = _sub(g)
    for name in ("matmul_simt", "matmul_small"):
        st, why = registry.by_name(name).check_support(sub, None)
        assert st != S.CUDNN_STATUS_SUCCESS and "node 'add1'" in why and "share one axis" in why, (name, why)


def _tc_sized_graph(kind):
    """scale -> bias -> ReLU after a matmul / conv of tensor-core-friendly sizes (multiples of 16)."""
    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    if kind == "mm":
        a = g.tensor(name="A", dim=[1, 16, 16], stride=[256, 16, 1])
        b = g.tensor(name="B", dim=[1, 16, 16], stride=[256, 16, 1])
        y, vd = g.matmul(a, b, name="mm"), [1, 1, 16]
    else:
        x = g.tensor(name="X", dim=[1, 16, 4, 4], stride=[256, 1, 64, 16])
        w = g.tensor(name="W", dim=[16, 16, 3, 3], stride=[144, 1, 48, 16])
        y = g.conv_fprop(x, w, padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv")
        vd = [1, 16, 1, 1]
    vs = [1] * (len(vd) - 2) + [16, 1] if kind == "mm" else [16, 1, 1, 1]
    y = g.mul(y, g.tensor(name="v0", dim=vd, stride=vs), name="mul0")
    y = g.add(y, g.tensor(name="v1", dim=vd, stride=vs), name="add1")
    y = g.relu(y, name="relu2")
    y.set_output(True)
    return g


def test_tensor_core_engines_refuse_packed_operands():
    for kind, names in (("mm", ("matmul_tc", "matmul_wgmma")), ("conv", ("conv_tc",))):
        g = _tc_sized_graph(kind)
        build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
        sub = _sub(g)
        for name in names:
            eng = registry.get(name)
            assert eng is not None, name
            st, why = eng.check_support(sub, None)
            assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "SIMT engines only" in why, (name, why)


@pytest.mark.parametrize("where", ["conv_nhwc", "conv_nhwc1x1", "mm_fp16"])
def test_packed_plan_is_fused_by_simt_engines_only(where):
    g, Y, io = make(where, "scale_bias_relu")
    names = build(g, cudnn.build_plan_policy.ALL)
    if where == "conv_nhwc1x1":
        assert any(n.startswith("conv_gemm_1x1") for n in names), names
    fused = {n.split("(")[0] for n in names if "composite" not in n}
    assert fused and fused <= SIMT, names


def test_packed_workspace_and_spec():
    """The packed buffer: NV-strided per channel, float32, slot-offset steps; its bytes at the aligned end of
    the workspace; one-operand epilogues keep their unslotted steps and workspace."""
    g, Y = conv_graph("nhwc", PACKED["three"])
    build(g, cudnn.build_plan_policy.HEURISTICS_CHOICE)
    sub = _sub(g)
    epi = gc.epilogue_of(sub, next(iter(sub.anchor.outputs.values())).dims,
                         lambda t: gc.channel_axis(t, next(iter(sub.anchor.outputs.values())).dims))
    p = epi.bias
    assert isinstance(p, gc.PackedVectors) and p.nv == 3 and p.n == 8 and p.strides[1] == 3
    assert gc.kdtype(p) == "float32" and p.span_elements() == 24 and p.nbytes == 256
    assert epi.spec.steps[0][:3] == ("vector", "col", PM.CUDNN_POINTWISE_MUL) and epi.spec.steps[0][-1] == 0
    assert epi.spec.steps[2] == ("bias", "col", 2)
    assert gc.vector_workspace(epi, 100) == 256 + 256 and gc.vector_workspace(epi, 0) == 256
    src = ep.source(epi.spec)
    assert "ld_bias(bias, b_off + 1)" in src and "ld_bias(bias, b_off + 2)" in src, src
    assert ep.vector("col", PM.CUDNN_POINTWISE_ADD) == ("bias", "col")
