"""lower_operation_graph: every operation descriptor becomes its IR node with the right ports,
attributes and tensors (checked through the finalized ir.OpGraph of a one-operation graph)."""
import pytest

import test_backend_conv_ops as conv_cases
import test_backend_ops as op_cases
from backend_build import A, D, DT, S, T, conv_desc, expect, finalize, graph, make, pointwise_desc, pointwise_op, tensor
from ncudnn.backend import lower_operation_graph
from ncudnn.types import cudnnBackendNormFwdPhase_t as PH
from ncudnn.types import cudnnBackendNormMode_t as NM
from ncudnn.types import cudnnPointwiseMode_t as P
from ncudnn.types import cudnnRngDistribution_t as RNG

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
Q, DQ = D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR, D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR


def rng_op(dist=RNG.CUDNN_RNG_DISTRIBUTION_UNIFORM):
    rng = make(D.CUDNN_BACKEND_RNG_DESCRIPTOR, {A.CUDNN_ATTR_RNG_DISTRIBUTION: (T.CUDNN_TYPE_RNG_DISTRIBUTION, dist),
                                                A.CUDNN_ATTR_RNG_UNIFORM_DIST_MINIMUM: (T.CUDNN_TYPE_DOUBLE, -2.0)})
    return make(D.CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_RNG_DESC: (DESC, rng), A.CUDNN_ATTR_OPERATION_RNG_YDESC: (DESC, tensor(1, [4, 4])),
        A.CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC: (DESC, tensor(2, [1, 1], dtype=DT.CUDNN_DATA_INT64, by_value=True)),
        A.CUDNN_ATTR_OPERATION_RNG_SEED: (T.CUDNN_TYPE_INT64, 77)})


def resample_bwd():
    B = "CUDNN_ATTR_OPERATION_RESAMPLE_BWD_"
    return make(D.CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR, {
        A[B + "DESC"]: (DESC, op_cases.resample_desc()), A[B + "DXDESC"]: (DESC, tensor(1, [2, 3, 8, 8])),
        A[B + "DYDESC"]: (DESC, tensor(2, [2, 3, 4, 4])), A[B + "XDESC"]: (DESC, tensor(3, [2, 3, 8, 8]))})


#: name -> (builder, IR op, {port: uid}, {attribute: value})
CASES = {
    "conv_fprop": (lambda: conv_cases.conv_op(conv_cases.FWD, *conv_cases.grouped_tensors(), conv_desc(3), beta=0.5),
                   "conv_fprop", {"X": ord("x"), "W": ord("w"), "Y": ord("y")}, {"beta": 0.5, "groups": 2}),
    "conv_dgrad": (lambda: conv_cases.conv_op(conv_cases.DGRAD, *conv_cases.grouped_tensors(), conv_desc(3)),
                   "conv_dgrad", {"DX": ord("x"), "W": ord("w"), "DY": ord("y")}, {}),
    "conv_wgrad": (lambda: conv_cases.conv_op(conv_cases.WGRAD, tensor(1, [2, 6, 8, 8]), tensor(2, [4, 3, 3, 3]),
                                              tensor(3, [2, 4, 6, 6]), conv_desc(2)),
                   "conv_wgrad", {"X": 1, "DW": 2, "DY": 3}, {"groups": 2}),
    "pointwise": (lambda: pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_RELU_BWD), x=tensor(1, [2, 3]),
                                       dy=tensor(2, [2, 3]), dx=tensor(3, [2, 3])),
                  "pointwise", {"X": 1, "DY": 2, "DX": 3}, {"mode": P.CUDNN_POINTWISE_RELU_BWD}),
    "matmul": (lambda: op_cases.matmul([4, 5], [5, 6], [4, 6]), "matmul", {"A": 1, "B": 2, "C": 3}, {}),
    "reduction": (lambda: op_cases.reduction_op([4, 6, 8], [4, 1, 1]), "reduction", {"X": 1, "Y": 2}, {"mode": 0}),
    "genstats": (lambda: op_cases.genstats([2, 8, 4, 4], [1, 8, 1, 1], [1, 8, 1, 1]), "genstats",
                 {"X": 1, "SUM": 2, "SQSUM": 3}, {}),
    "bn_finalize": (op_cases.bn_finalize, "bn_finalize", {"SUM": 10, "EQ_BIAS": 17, "PREV_RUNNING_MEAN": 18,
                                                          "EPSILON": 31}, {}),
    "norm_fwd_train": (lambda: op_cases.norm_fwd(NM.CUDNN_BATCH_NORM), "norm_fwd",
                       {"X": 1, "Y": 2, "SCALE": 3, "MEAN": 6, "INV_VARIANCE": 7}, {"mode": NM.CUDNN_BATCH_NORM}),
    "norm_fwd_infer": (lambda: op_cases.norm_fwd(phase=PH.CUDNN_NORM_FWD_INFERENCE), "norm_fwd",
                       {"MEAN_IN": 6, "INV_VARIANCE_IN": 7}, {"phase": PH.CUDNN_NORM_FWD_INFERENCE}),
    "norm_bwd": (op_cases.norm_bwd, "norm_bwd", {"X": 1, "DY": 2, "DX": 3, "DSCALE": 5, "MEAN": 7}, {}),
    "resample_fwd": (lambda: op_cases.resample_fwd(idx=(2, 3, 4, 4)), "resample_fwd", {"X": 1, "Y": 2, "IDX": 3},
                     {"pre_padding": (1, 0), "post_padding": (0, 1), "window": (2, 2)}),
    "resample_bwd": (resample_bwd, "resample_bwd", {"DX": 1, "DY": 2, "X": 3}, {}),
    "concat": (op_cases.concat, "concat", {"X0": 1, "X1": 2, "Y": 9}, {"axis": 1}),
    "reshape": (lambda: make(D.CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, {
        A.CUDNN_ATTR_OPERATION_RESHAPE_XDESC: (DESC, tensor(1, [2, 3, 4])),
        A.CUDNN_ATTR_OPERATION_RESHAPE_YDESC: (DESC, tensor(2, [6, 4]))}), "reshape", {"X": 1, "Y": 2}, {}),
    "rng": (rng_op, "rng", {"Y": 1, "OFFSET": 2}, {"seed": 77, "uniform_min": -2.0, "uniform_max": 1.0}),
    "quantize": (lambda: op_cases.block_scale(Q, DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FP8_E8M0),
                 "block_scale_quantize", {"X": 1, "Y": 2, "SCALE": 3}, {"block_size": 16}),
    "dequantize": (lambda: op_cases.block_scale(DQ, DT.CUDNN_DATA_FP8_E4M3, DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_FP8_E8M0),
                   "block_scale_dequantize", {"X": 1, "SCALE": 3, "Y": 2}, {"block_size": 16}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_operation_lowers_to_its_node(case):
    build, op_name, ports, attrs = CASES[case]
    g = graph([build()])
    ir = g.state["graph"]
    assert ir.finalized and len(ir.nodes) == 1
    node = ir.nodes[0]
    assert node.OP == op_name
    tensors = {**node.inputs, **node.outputs}
    for port, uid in ports.items():
        assert tensors[port].uid == uid, port
    for k, v in attrs.items():
        assert getattr(node, k) == v, k
    assert lower_operation_graph(g).nodes[0].OP == op_name


def test_grouped_conv_tensors_are_merged_into_the_ir_layout():
    node = graph([CASES["conv_fprop"][0]()]).state["graph"].nodes[0]
    assert node.inputs["X"].dims == (1, 6, 3, 5, 5)
    assert node.inputs["W"].dims == (8, 3, 1, 3, 3) and node.inputs["W"].strides == (27, 9, 9, 3, 1)
    assert node.outputs["Y"].dims == (1, 8, 3, 3, 3)


def test_bn_bwd_weights_lowers_with_the_sums_of_dy_and_dy_x():
    ir = graph([op_cases.bn_bwd_weights()]).state["graph"]
    ops = [n.OP for n in ir.nodes]
    assert sorted(ops) == ["bn_bwd_weights", "pointwise", "reduction", "reduction"] and ops[-1] == "bn_bwd_weights"
    red1, mul, red2, bnw = sorted(ir.nodes, key=lambda n: ["bn_bwd_weights.dy_sum", "bn_bwd_weights.dy_x",
                                                               "bn_bwd_weights.dy_x_sum", "bn_bwd_weights"].index(n.name))
    assert red1.inputs["X"].uid == 2 and mul.inputs["X"].uid == 2 and mul.inputs["B"].uid == 1
    assert bnw.inputs["DY_SUM"] is red1.outputs["Y"] and bnw.inputs["DY_X_SUM"] is red2.outputs["Y"]
    assert red2.inputs["X"] is mul.outputs["Y"] and bnw.inputs["DY_SUM"].dims == (1, 8, 1, 1)
    assert all(t.uid < 0 and t.is_virtual for t in (red1.outputs["Y"], mul.outputs["Y"], red2.outputs["Y"]))
    assert {p: t.uid for p, t in bnw.outputs.items()} == {"DSCALE": 13, "DBIAS": 14, "EQ_DY_SCALE": 15,
                                                           "EQ_X_SCALE": 16, "EQ_BIAS": 17}


def test_a_dangling_virtual_output_is_refused_by_the_ir():
    expect(finalize(graph([op_cases.paged()], fin=False)), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_OPERATIONGRAPH_OPS",
           "dangling")


def test_ragged_offsets_are_lowered_and_typed():
    from backend_build import ok, set_attr
    off = tensor(50, [3, 1, 1, 1], dtype=DT.CUDNN_DATA_INT32)
    x = tensor(1, [2, 3], fin=False)
    ok(set_attr(x, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, DESC, off))
    ok(finalize(x))
    op = pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ABS), x=x, y=tensor(2, [2, 3]))
    node = graph([op]).state["graph"].nodes[0]
    assert node.inputs["X"].ragged_offset.uid == 50 and node.inputs["X"].ragged_offset.dims == (3, 1, 1, 1)
    bad_off = tensor(51, [3, 1, 1, 1])
    y = tensor(3, [2, 3], fin=False)
    ok(set_attr(y, A.CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, DESC, bad_off))
    expect(finalize(y), S.CUDNN_STATUS_BAD_PARAM, "CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC", "INT32 or INT64")
