"""What the attention engines share: the support check of an SDPA node, the compile-time
:class:`~ncudnn.kernels.attention.AttnSpec` it maps to, the knobs (TILE_M = BLOCK_M, TILE_N = BLOCK_N,
BLOCK_SIZE = THREADS) and the runtime arguments (sizes, strides, scale, band bounds) of its kernels."""
from numba.cuda import types

from ...kernels import attention as ka
from ...types import cudnnBackendKnobType_t, cudnnDataType_t, cudnnStatus_t
from ..base import OK, Config, Engine, KnobSpec
from ..membound.common import Arg, kdtype, written

S = cudnnStatus_t
K = cudnnBackendKnobType_t
IO_TYPES = ("float32", "float16", "bfloat16")
SEQ_TYPES = ("int32", "int64")
MAX_HEAD_DIM = 256


def no(status, node, field, why):
    return status, f"node '{node.name}' ({node.OP}): {field}: {why}"


def dims(node):
    """(B, H, HK, SQ, SK, D, DV) of an SDPA node."""
    q, v = node.inputs["Q"], node.inputs["V"]
    k = node.inputs["K"]
    return q.dims[0], q.dims[1], k.dims[1], q.dims[2], k.dims[2], q.dims[3], v.dims[3]


def _layout_ok(node, port, t, allowed):
    name = kdtype(t)
    if name not in allowed:
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, node, port,
                  f"data type {t.dtype.name} is not one of {allowed}")
    if t.vector_count != 1 or int(t.reordering) != 0:
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, node, port, "vectorized or reordered tensors")
    if t.ragged_offset is not None:
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, node, port, "ragged offsets (packed THD layout) are not "
                  "supported by ncudnn's attention engines yet")
    if any(int(s) < 0 for s in t.strides):
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, node, port, "negative strides")
    return OK


def check_node(node, tensor_ports):
    """(status, reason) for an SDPA node: the options, data types, layouts and head dims the kernels take."""
    if float(node.dropout_probability or 0.0) > 0.0 and "SEED" not in node.inputs:
        return no(S.CUDNN_STATUS_BAD_PARAM, node, "SEED", "dropout needs the seed tensor")
    for p in ("SEED", "OFFSET"):
        t = node.inputs.get(p)
        if t is None:
            continue
        if not t.is_by_value:
            return no(S.CUDNN_STATUS_NOT_SUPPORTED, node, p, "dropout seed / offset in device memory: the "
                      "attention engines take them as pass-by-value tensors only")
        if kdtype(t) not in SEQ_TYPES:
            return no(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, node, p, f"data type {t.dtype.name} is not INT32 / INT64")
    if node.compute_dtype not in (None, cudnnDataType_t.CUDNN_DATA_FLOAT):
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, node, "compute_data_type",
                  f"{node.compute_dtype.name}: the kernels compute in FLOAT")
    for port in tensor_ports:
        t = node.inputs.get(port, node.outputs.get(port))
        if t is None:
            continue
        st = _layout_ok(node, port, t, ("float32",) if port == "STATS" else IO_TYPES)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
    for port in ("BIAS", "DBIAS"):
        t = node.inputs.get(port, node.outputs.get(port))
        if t is not None:
            st = _layout_ok(node, port, t, IO_TYPES)
            if st[0] != S.CUDNN_STATUS_SUCCESS:
                return st
    for port in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
        t = node.inputs.get(port)
        if t is not None:
            if t.is_by_value:
                return no(S.CUDNN_STATUS_NOT_SUPPORTED, node, port, "by-value sequence lengths")
            st = _layout_ok(node, port, t, SEQ_TYPES)
            if st[0] != S.CUDNN_STATUS_SUCCESS:
                return st
    if "SEQ_LEN_Q" in node.inputs and kdtype(node.inputs["SEQ_LEN_Q"]) != kdtype(node.inputs["SEQ_LEN_KV"]):
        return no(S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, node, "SEQ_LEN_KV", "not the data type of SEQ_LEN_Q")
    sc = node.inputs.get("SCALE")
    if sc is not None and not sc.is_by_value:
        st = _layout_ok(node, "SCALE", sc, IO_TYPES)
        if st[0] != S.CUDNN_STATUS_SUCCESS:
            return st
    _, _, _, _, _, d, dv = dims(node)
    for name, x in (("Q/K head dim", d), ("V head dim", dv)):
        if x % 8 or not 8 <= x <= MAX_HEAD_DIM:
            return no(S.CUDNN_STATUS_NOT_SUPPORTED, node, name, f"{x}: the kernels take multiples of 8 up to "
                      f"{MAX_HEAD_DIM}")
    return OK


def check_engine(engine, sub, ctx, tensor_ports):
    """(status, reason) every attention engine starts its check_support with: the subgraph kind
    (``Engine.check_support``) and :func:`check_node` of its node, the reason prefixed with the engine's name."""
    st = Engine.check_support(engine, sub, ctx)
    if st[0] != S.CUDNN_STATUS_SUCCESS:
        return st
    st = check_node(sub.nodes[0], tensor_ports)
    return st if st[0] == S.CUDNN_STATUS_SUCCESS else (st[0], f"{engine.name}: {st[1]}")


def spec_of(node, sub, backward):
    """The AttnSpec of an SDPA node (what its kernels are compiled for)."""
    _, _, _, _, _, d, dv = dims(node)
    align, left, right = node.band()
    ins, outs = node.inputs, node.outputs
    kw = dict(Q=kdtype(ins["Q"]), K=kdtype(ins["K"]), V=kdtype(ins["V"]),
              BIAS=kdtype(ins["BIAS"]) if "BIAS" in ins else None,
              SEQ=kdtype(ins["SEQ_LEN_Q"]) if "SEQ_LEN_Q" in ins else None,
              SCALE=kdtype(ins["SCALE"]) if "SCALE" in ins and not ins["SCALE"].is_by_value else None,
              ALIBI=bool(node.alibi_mask), HAS_LEFT=left is not None, HAS_RIGHT=right is not None,
              BOTTOM_RIGHT=align == "bottom_right", DROPOUT=float(node.dropout_probability or 0.0) > 0.0)
    if backward:
        db = written(sub, outs.get("DBIAS"))
        kw.update(O=kdtype(ins["O"]), DO=kdtype(ins["DO"]), DQ=kdtype(outs["DQ"]), DK=kdtype(outs["DK"]),
                  DV=kdtype(outs["DV"]), DBIAS=kdtype(db) if db is not None else None, STATS=False)
    else:
        kw.update(O=kdtype(outs["O"]), STATS=written(sub, outs.get("STATS")) is not None)
    return ka.AttnSpec(d, dv, **kw)


# ------------------------------------------------------------------------------------------ knobs

KNOBS = (KnobSpec(K.CUDNN_KNOB_TYPE_TILE_M, 8, 64, 8, 32),
         KnobSpec(K.CUDNN_KNOB_TYPE_TILE_N, 8, 64, 8, 32),
         KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 32, 256, 32, 128))


def cfg_of(config):
    return ka.AttnConfig(config.get(K.CUDNN_KNOB_TYPE_TILE_M, 32), config.get(K.CUDNN_KNOB_TYPE_TILE_N, 32),
                         config.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 128))


def config_of(name, cfg):
    return Config(name, tuple(sorted(((int(K.CUDNN_KNOB_TYPE_TILE_M), cfg.BLOCK_M),
                                      (int(K.CUDNN_KNOB_TYPE_TILE_N), cfg.BLOCK_N),
                                      (int(K.CUDNN_KNOB_TYPE_BLOCK_SIZE), cfg.THREADS)))))


# --------------------------------------------------------------------------------- kernel arguments

def strides4(t):
    """Element strides (b, h, s, d) of a 4-d tensor, 0 on axes of extent 1 (broadcast)."""
    return [Arg.const(0 if int(n) == 1 else int(s)) for n, s in zip(t.dims, t.strides)]


def opt_tensor(t, dtype="float32"):
    return Arg.tensor(t) if t is not None else Arg.dummy(dtype)


def scale_args(node):
    """(array argument, float32 value argument) of the attention scale."""
    sc = node.inputs.get("SCALE")
    if sc is None:
        return Arg.dummy("float32"), Arg.const(float(node.attn_scale if node.attn_scale is not None else 1.0),
                                               types.float32)
    if sc.is_by_value:
        return Arg.dummy("float32"), Arg.scalar(sc, types.float32, float)
    return Arg.tensor(sc), Arg.const(1.0, types.float32)


def band_args(node):
    _, left, right = node.band()
    return [Arg.const(int(left or 0)), Arg.const(int(right or 0))]


def seq_args(node):
    sq, skv = node.inputs.get("SEQ_LEN_Q"), node.inputs.get("SEQ_LEN_KV")
    return [opt_tensor(sq, "int32"), opt_tensor(skv, "int32")]


def bias_args(node):
    """(bias array, its four broadcast strides)."""
    bias = node.inputs.get("BIAS")
    if bias is None:
        return Arg.dummy("float32"), [Arg.const(0)] * 4
    return Arg.tensor(bias), strides4(bias)


def sizes(node):
    B, H, HK, SQ, SK, _, _ = dims(node)
    return [Arg.const(int(x)) for x in (B, H, HK, SQ, SK)]


def dropout_args(node):
    """(seed, rng offset, p_keep, drop_scale) arguments of the dropout (placeholders without one)."""
    p = float(node.dropout_probability or 0.0)
    if p <= 0.0:
        return [Arg.const(0), Arg.const(0), Arg.const(1.0, types.float64), Arg.const(1.0, types.float32)]
    seed, off = node.inputs["SEED"], node.inputs.get("OFFSET")
    return [Arg.scalar(seed, types.int64, int), Arg.scalar(off, types.int64, int) if off is not None else Arg.const(0),
            Arg.const(1.0 - p, types.float64), Arg.const(1.0 / (1.0 - p), types.float32)]
