"""Helpers of the memory-bound engine tests: strided device buffers (any dtype, bf16 as its bits),
poisoned outputs, graph execution through the engine API."""
import ml_dtypes
import numpy as np
from numba import cuda

from ncudnn.engines import api
from ncudnn.ir import TensorDesc, packed_strides
from ncudnn.testing import poison_value
from ncudnn.types import cudnnBackendHeurMode_t as HM, cudnnDataType_t as DT

NP = {DT.CUDNN_DATA_FLOAT: np.float32, DT.CUDNN_DATA_HALF: np.float16,
      DT.CUDNN_DATA_BFLOAT16: ml_dtypes.bfloat16, DT.CUDNN_DATA_DOUBLE: np.float64,
      DT.CUDNN_DATA_INT32: np.int32}
TOLNAME = {DT.CUDNN_DATA_FLOAT: "float32", DT.CUDNN_DATA_HALF: "float16",
           DT.CUDNN_DATA_BFLOAT16: "bfloat16", DT.CUDNN_DATA_DOUBLE: "float64"}
F32 = DT.CUDNN_DATA_FLOAT


def t(uid, dims, dtype=F32, strides=None, name="", **kw):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype,
                      name=name or f"t{uid}", **kw)


def scalar(uid, value, name="", dtype=F32):
    nd = 1
    return TensorDesc(uid, (1,) * nd, (1,) * nd, dtype, is_by_value=True, value=value, name=name or f"s{uid}")


def _span(dims, strides):
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides))


def _bits(a):
    return a.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a


def upload(a, desc):
    """Device buffer holding host array ``a`` cast to the descriptor's dtype at its strides (the gaps
    poisoned)."""
    dt = np.dtype(NP[desc.dtype])
    host = np.full(_span(desc.dims, desc.strides), poison_value(dt), dt)
    view = np.lib.stride_tricks.as_strided(host, desc.dims, [s * dt.itemsize for s in desc.strides])
    view[...] = np.asarray(a, dtype=np.float64).astype(dt) if dt.kind == "f" or dt == ml_dtypes.bfloat16 \
        else np.asarray(a).astype(dt)
    return cuda.to_device(_bits(host))


def poisoned(desc):
    dt = np.dtype(NP[desc.dtype])
    return cuda.to_device(_bits(np.full(_span(desc.dims, desc.strides), poison_value(dt), dt)))


def download(buf, desc):
    """float64 host copy of the tensor a device buffer holds at the descriptor's strides."""
    dt = np.dtype(NP[desc.dtype])
    host = buf.copy_to_host().view(dt)
    return np.lib.stride_tricks.as_strided(host, desc.dims, [s * dt.itemsize for s in desc.strides]) \
        .astype(np.float64)


def cast(a, dtype):
    """``a`` rounded to ``dtype`` (what the kernel reads), as float64."""
    return np.asarray(a, dtype=np.float64).astype(NP[dtype]).astype(np.float64)


def run(graph, pack, engine=None, mode=HM.CUDNN_HEUR_MODE_A):
    """Heuristics -> plan -> execute (with workspace) on ``pack``; returns the plan."""
    ecs = api.get_heuristics(graph, mode)
    assert ecs, "no engine config"
    ec = ecs[0] if engine is None else next(e for e in ecs if e.config.engine == engine)
    plan = api.build_plan(graph, ec)
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xA5, np.uint8)) if plan.workspace_size else None
    api.execute(plan, pack, ws)
    return plan


def run_ec(graph, pack, ec):
    """Build ``ec`` on ``graph`` and execute it on ``pack`` (with workspace); returns the plan."""
    plan = api.build_plan(graph, ec)
    ws = cuda.to_device(np.full(max(plan.workspace_size, 1), 0xA5, np.uint8)) if plan.workspace_size else None
    api.execute(plan, pack, ws)
    return plan


def random_pack(ir, rng, positive=(), span=1.0):
    """(vals, pack, outs) for an IR graph: every graph input drawn uniform in [-span, span] (``positive`` ports in
    [0.5, 2]) and uploaded (``vals`` holds it rounded to its dtype, for the oracle; by-value scalars their value),
    every real output poisoned; ``pack`` maps uid -> device buffer, ``outs`` the output buffers."""
    produced = {u.uid for n in ir.nodes for u in n.outputs.values()}
    vals, pack, outs = {}, {}, {}
    for n in ir.nodes:
        for p, d in n.inputs.items():
            if d.uid in vals or d.uid in produced:
                continue
            if d.is_by_value:
                vals[d.uid] = np.float64(d.value)
                continue
            a = rng.uniform(*((0.5, 2.0) if p in positive else (-span, span)), d.dims)
            vals[d.uid], pack[d.uid] = cast(a, d.dtype), upload(a, d)
        for d in n.outputs.values():
            if not d.is_virtual:
                outs[d.uid] = pack[d.uid] = poisoned(d)
    return vals, pack, outs


def oracle(ir, vals):
    """The float64 reference of every node in order (``vals`` gains each output, by uid); returns uid -> desc of
    the outputs."""
    from ncudnn.reference.ops import run_node

    descs = {}
    for n in ir.nodes:
        ref = run_node(n, {p: vals[d.uid] for p, d in n.inputs.items()})
        for p, d in n.outputs.items():
            vals[d.uid], descs[d.uid] = ref[p], d
    return descs
