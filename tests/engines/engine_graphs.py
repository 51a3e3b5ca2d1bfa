"""Graph builders shared by the engine-layer tests (small shapes, fresh descriptors every call)."""
import numpy as np
from numba import cuda

from ncudnn.ir import (ConvFprop, Matmul, NormFwd, OpGraph, Pointwise, Reduction, TensorDesc,
                       packed_strides)
from ncudnn.types import (cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM,
                          cudnnDataType_t as DT, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO)

F32 = DT.CUDNN_DATA_FLOAT


def t(uid, dims, dtype=F32, name="", **kw):
    return TensorDesc(uid, tuple(dims), packed_strides(dims), dtype, name=name or f"t{uid}", **kw)


def v(uid, name=""):
    return TensorDesc(uid, is_virtual=True, name=name or f"v{uid}")


def pw(name, mode, out, **ins_attrs):
    ins = {k: ins_attrs.pop(k) for k in ("X", "B", "T", "DY") if k in ins_attrs}
    port = "DX" if "DY" in ins else "Y"
    return Pointwise(name, ins, {port: out}, mode=mode, **ins_attrs)


def bias_relu_mul(dims=(2, 3, 4, 5), base=1, dtype=F32, finalize=True, dynamic=False):
    """out = (x + b) * relu(y), b broadcast over all but dim 1. uids base..base+3 (x, b, y, out)."""
    bd = (1, dims[1]) + (1,) * (len(dims) - 2)
    x, b, y, o = t(base, dims, dtype, "x"), t(base + 1, bd, dtype, "b"), t(base + 2, dims, dtype, "y"), \
        t(base + 3, dims, dtype, "out")
    v1, v2 = v(base + 10), v(base + 11)
    g = OpGraph([pw("add", PM.CUDNN_POINTWISE_ADD, v1, X=x, B=b),
                 pw("relu", PM.CUDNN_POINTWISE_RELU_FWD, v2, X=y),
                 pw("mul", PM.CUDNN_POINTWISE_MUL, o, X=v1, B=v2)], name="bias_relu_mul",
                dynamic_shapes=dynamic)
    return g.finalize() if finalize else g


def conv_bias_relu(n=1, c=4, k=8, hw=6):
    x, w, b, y = t(1, (n, c, hw, hw)), t(2, (k, c, 3, 3)), t(3, (1, k, 1, 1)), t(4, (n, k, hw, hw))
    conv = ConvFprop("conv", {"X": x, "W": w}, {"Y": v(10)}, spatial_dims=2, stride=(1, 1),
                     pre_padding=(1, 1), post_padding=(1, 1), dilation=(1, 1))
    g = OpGraph([conv, pw("bias", PM.CUDNN_POINTWISE_ADD, v(11), X=conv.outputs["Y"], B=b)])
    g.add(pw("relu", PM.CUDNN_POINTWISE_RELU_FWD, y, X=g.nodes[1].outputs["Y"]))
    return g.finalize()


def matmul_gelu(m=4, n=8, k=16):
    a, b, c = t(1, (1, m, k)), t(2, (1, k, n)), t(3, (1, m, n))
    mm = Matmul("mm", {"A": a, "B": b}, {"C": v(10)})
    return OpGraph([mm, pw("gelu", PM.CUDNN_POINTWISE_GELU_FWD, c, X=mm.outputs["C"])]).finalize()


def norm_relu(n=2, hidden=8):
    x, sc, bi, y = t(1, (n, hidden, 1, 1)), t(2, (1, hidden, 1, 1)), t(3, (1, hidden, 1, 1)), t(4, (n, hidden, 1, 1))
    eps = TensorDesc(5, (1, 1, 1, 1), (1, 1, 1, 1), F32, is_by_value=True, value=1e-5, name="eps")
    norm = NormFwd("ln", {"X": x, "SCALE": sc, "BIAS": bi, "EPSILON": eps}, {"Y": v(10)},
                   mode=NM.CUDNN_LAYER_NORM, phase=PH.CUDNN_NORM_FWD_INFERENCE)
    return OpGraph([norm, pw("relu", PM.CUDNN_POINTWISE_RELU_FWD, y, X=norm.outputs["Y"])]).finalize()


def relu_rowsum_scale(rows=3, cols=5):
    """out = rowsum(relu(x)) * s: pointwise | reduction | pointwise, two materialized virtuals."""
    x, s, o = t(1, (rows, cols)), t(2, (rows, 1)), t(3, (rows, 1))
    r, red = v(10, "relu_out"), TensorDesc(11, (rows, 1), packed_strides((rows, 1)), F32, is_virtual=True,
                                           name="rowsum")
    return OpGraph([pw("relu", PM.CUDNN_POINTWISE_RELU_FWD, r, X=x),
                    Reduction("sum", {"X": r}, {"Y": red}, mode=RO.CUDNN_REDUCE_TENSOR_ADD),
                    pw("scale", PM.CUDNN_POINTWISE_MUL, o, X=red, B=s)], name="relu_rowsum_scale").finalize()


def two_pointwise_stages(dims=(2, 3, 4)):
    """y1 = exp(x) (written, non-virtual); out = y1 * z: two pointwise subgraphs, nothing materialized."""
    x, y1, z, o = t(1, dims, name="x"), t(2, dims, name="y1"), t(3, dims, name="z"), t(4, dims, name="out")
    return OpGraph([pw("exp", PM.CUDNN_POINTWISE_EXP, y1, X=x),
                    pw("mul", PM.CUDNN_POINTWISE_MUL, o, X=y1, B=z)], name="two_stages").finalize()


def device(a):
    return cuda.to_device(np.ascontiguousarray(a))


def poisoned(shape, dtype=np.float32):
    return cuda.to_device(np.full(shape, np.nan, dtype))


def random_pair(rng, shape, dtype=np.float32):
    return (rng.uniform(-1, 1, shape).astype(dtype), rng.uniform(-1, 1, shape).astype(dtype))


def sm90_pointwise_kernel(block=256, unroll=4):
    """The pointwise_fused kernel of bias_relu_mul as the engine specializes it (compile checks)."""
    from ncudnn.engines import api
    from ncudnn.engines.pointwise.fused import _layout
    from ncudnn.kernels.pointwise import fused as kpw

    lay = _layout(api.problem(bias_relu_mul((8, 64, 32, 32))))
    return kpw.build_pointwise(lay.spec(block, unroll))


def sm90_pointwise_signature(made):
    """The argument types the engine compiles with (flat C arrays of the storage types, int64 n)."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    meta = made  # a PointwiseKernel: storage dtypes per input then output
    return tuple(types.Array(numpy_support.from_dtype(st), 1, "C") for st in meta.storage) + (types.int64,)
