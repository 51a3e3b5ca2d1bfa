"""Partitioning: the softmax / log-softmax pattern becomes one subgraph; pointwise groups stay convex."""
from ncudnn.ir import OpGraph, Pointwise, Reduction, TensorDesc, packed_strides, partition
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RM

F = DT.CUDNN_DATA_FLOAT


def t(uid, dims=None, virtual=False):
    return TensorDesc(uid, dims, packed_strides(dims) if dims else None, F if dims else None, is_virtual=virtual)


def softmax_graph(log=False, exp_virtual=True):
    x, y = t(1, (4, 8, 1, 1)), t(2)
    m, s, e, z = t(3, (4, 1, 1, 1), True), t(4, virtual=True), t(5, virtual=exp_virtual), t(6, (4, 1, 1, 1), True)
    nodes = [Reduction("max", {"X": x}, {"Y": m}, mode=RM.CUDNN_REDUCE_TENSOR_MAX),
             Pointwise("sub", {"X": x, "B": m}, {"Y": s}, mode=PM.CUDNN_POINTWISE_SUB),
             Pointwise("exp", {"X": s}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
             Reduction("sum", {"X": e}, {"Y": z}, mode=RM.CUDNN_REDUCE_TENSOR_ADD)]
    if log:
        lz = t(7, virtual=True)
        nodes += [Pointwise("log", {"X": z}, {"Y": lz}, mode=PM.CUDNN_POINTWISE_LOG),
                  Pointwise("out", {"X": s, "B": lz}, {"Y": y}, mode=PM.CUDNN_POINTWISE_SUB)]
    else:
        nodes += [Pointwise("div", {"X": e, "B": z}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV)]
    if not exp_virtual:
        e.dims, e.strides, e.dtype = (4, 8, 1, 1), packed_strides((4, 8, 1, 1)), F
    return OpGraph(nodes, io_dtype=F, intermediate_dtype=F, compute_dtype=F).finalize()


def test_softmax_is_one_subgraph():
    subs, mat = partition(softmax_graph())
    assert [s.kind for s in subs] == ["softmax"]
    assert subs[0].meta["log"] is False and subs[0].meta["axes"] == (1,)
    assert subs[0].meta["y"].uid == 2 and not mat


def test_log_softmax_is_one_subgraph():
    subs, _ = partition(softmax_graph(log=True))
    assert [s.kind for s in subs] == ["softmax"] and subs[0].meta["log"] is True
    assert [n.name for n in subs[0].nodes] == ["max", "sub", "exp", "sum", "log", "out"]


def test_softmax_with_a_real_exp_tensor_partitions_without_a_cycle():
    """exp written to memory: not the pattern, but the pointwise groups must stay convex."""
    subs, _ = partition(softmax_graph(exp_virtual=False))
    kinds = [s.kind for s in subs]
    assert kinds[0] == "reduction" and "softmax" not in kinds
    names = [[n.name for n in s.nodes] for s in subs]
    assert names.index(["sum"]) < names.index(["div"])  # div waits for the sum


def test_non_convex_pointwise_group_is_split():
    """a -> b (pointwise), a -> reduction -> c(b, r): c may not join a's group through the reduction."""
    x, r = t(1, (2, 4)), t(5, (2, 1), True)
    a, b, y = t(2, virtual=True), t(3, virtual=True), t(4)
    g = OpGraph([Pointwise("a", {"X": x}, {"Y": a}, mode=PM.CUDNN_POINTWISE_EXP),
                 Pointwise("b", {"X": a}, {"Y": b}, mode=PM.CUDNN_POINTWISE_NEG),
                 Reduction("r", {"X": a}, {"Y": r}, mode=RM.CUDNN_REDUCE_TENSOR_ADD),
                 Pointwise("c", {"X": b, "B": r}, {"Y": y}, mode=PM.CUDNN_POINTWISE_MUL)],
                io_dtype=F, intermediate_dtype=F, compute_dtype=F).finalize()
    subs, mat = partition(g)
    names = [[n.name for n in s.nodes] for s in subs]
    assert names == [["a", "b"], ["r"], ["c"]]
    assert mat == {2, 3, 5}
