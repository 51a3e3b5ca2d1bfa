"""softmax_fused.cost: computed from the pattern's tensor sizes alone (no kernel source generated),
equal to the cost through the built Step (``cost_plain``, the kernel-layer path) on forward / log /
backward patterns of several shapes, dtypes and every BLOCK_SIZE; and cheap to call."""
import time

import pytest

from ncudnn.engines import api, registry
from ncudnn.engines.softmax.fused import BLOCKS
from ncudnn.ir import OpGraph
from ncudnn.ir.partition import Subgraph
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO

import membound_util as U
from test_softmax_engine import fwd_graph, pw, red, v

F32, F16, BF16, F64 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_DOUBLE


def bwd_graph(dims, stats, dtype, log):
    y, dy, dx = U.t(1, dims, dtype, name="y"), U.t(2, dims, dtype, name="dy"), U.t(3, dims, dtype, name="dx")
    if log:
        s, ey, t = v(10, "s", stats), v(11, "ey"), v(12, "t")
        nodes = [red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, dy, s), pw("exp", PM.CUDNN_POINTWISE_EXP, ey, X=y),
                 pw("mul", PM.CUDNN_POINTWISE_MUL, t, X=ey, B=s), pw("sub", PM.CUDNN_POINTWISE_SUB, dx, X=dy, B=t)]
    else:
        p, s, q = v(10, "p"), v(11, "s", stats), v(12, "q")
        nodes = [pw("mul", PM.CUDNN_POINTWISE_MUL, p, X=dy, B=y), red("sum", RO.CUDNN_REDUCE_TENSOR_ADD, p, s),
                 pw("sub", PM.CUDNN_POINTWISE_SUB, q, X=dy, B=s), pw("mul_y", PM.CUDNN_POINTWISE_MUL, dx, X=y, B=q)]
    return OpGraph(nodes).finalize()


CASES = [("accurate", (4096, 1024), (4096, 1), F32), ("accurate", (7, 33), (7, 1), F16),
         ("fast", (2, 5, 3, 2), (2, 1, 3, 2), BF16), ("log", (300, 5000), (300, 1), F32),
         ("log", (3, 40), (3, 1), F64), ("accurate", (64, 12, 128, 128), (64, 12, 128, 1), F16),
         ("bwd", (513, 129), (513, 1), F32), ("bwd_log", (8, 4, 6), (8, 1, 6), BF16),
         ("bwd", (1, 1 << 20), (1, 1), F16)]


def _sub(algo, dims, stats, dtype):
    if algo.startswith("bwd"):
        g = bwd_graph(dims, stats, dtype, algo == "bwd_log")
    else:
        g = fwd_graph(dims, stats, dtype=dtype, algo=algo)[0]
    return Subgraph(kind="softmax", nodes=list(g.nodes))


@pytest.mark.parametrize("algo,dims,stats,dtype", CASES)
def test_cost_equals_the_step_cost(algo, dims, stats, dtype):
    eng = registry.by_name("softmax_fused")
    sub = _sub(algo, dims, stats, dtype)
    ctx = api.context()
    assert eng.check_support(sub, ctx)[0] == 0
    knob = eng.knobs(sub)[0].type
    seen = set()
    for b in BLOCKS:
        cfg = eng.default_config(sub).with_knob(knob, b)
        new, old = eng.cost(sub, cfg, ctx.device), eng.cost_plain(sub, cfg, ctx.device)
        assert 0 < new < 1.0
        assert abs(new - old) <= 1e-12 * old, (b, new, old)
        seen.add(new)
    assert len(seen) == 2          # BLOCK_SIZE 0 and the forced sizes (5% more)


def test_cost_grows_with_bytes_and_generates_no_kernel(monkeypatch):
    from ncudnn.kernels.softmax import axis as ksm

    def boom(*a, **k):
        raise AssertionError("cost generated a kernel")
    monkeypatch.setattr(ksm, "_fwd_kernel", boom)
    monkeypatch.setattr(ksm, "_bwd_kernel", boom)
    eng = registry.by_name("softmax_fused")
    dev = api.context().device
    small, big = _sub("accurate", (64, 1024), (64, 1), F32), _sub("accurate", (64, 1024), (64, 1), F64)
    bwd = _sub("bwd", (64, 1024), (64, 1), F32)
    cfg = eng.default_config(small)
    assert eng.cost(small, cfg, dev) < eng.cost(big, cfg, dev)
    assert eng.cost(small, cfg, dev) < eng.cost(bwd, cfg, dev)
    t0 = time.perf_counter()
    for _ in range(200):
        eng.cost(small, cfg, dev)
    assert (time.perf_counter() - t0) / 200 < 200e-6
