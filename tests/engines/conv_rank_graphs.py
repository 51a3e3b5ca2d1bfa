"""Conv graphs for the cold-ranking tests of the implicit-GEMM engines (test_crank_*): fprop (with
bias + relu or plain), dgrad and wgrad; 1x1 / 3x3 / 7x7 filters, stride 1 / 2, NCHW / NHWC,
FP32 / FP16 / BF16, N 1..128."""
from ncudnn.ir import ConvDgrad, ConvFprop, ConvWgrad, OpGraph, Pointwise, TensorDesc, packed_strides
from ncudnn.ir.tensor import nhwc_order
from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM

DTYPES = {"f32": DT.CUDNN_DATA_FLOAT, "f16": DT.CUDNN_DATA_HALF, "bf16": DT.CUDNN_DATA_BFLOAT16}


def _t(uid, dims, dt, nhwc):
    return TensorDesc(uid, tuple(dims), packed_strides(dims, nhwc_order(4) if nhwc else None), dt, name=f"t{uid}")


def conv_graph(kind, n, c, h, k, r, stride, nhwc=True, dtype="f32", epilogue=True, groups=1):
    """A 2-D r x r convolution with padding r // 2 (finalized OpGraph)."""
    dt = DTYPES[dtype]
    pad = r // 2
    p = (h + 2 * pad - r) // stride + 1
    attrs = dict(spatial_dims=2, stride=(stride, stride), pre_padding=(pad, pad), post_padding=(pad, pad),
                 dilation=(1, 1))
    x, w, y = _t(1, (n, c, h, h), dt, nhwc), _t(2, (k, c // groups, r, r), dt, nhwc), _t(4, (n, k, p, p), dt, nhwc)
    if groups != 1:
        attrs["groups"] = groups
    cd = DT.CUDNN_DATA_FLOAT
    if kind == "dgrad":
        return OpGraph([ConvDgrad("d", {"DY": y, "W": w}, {"DX": x}, **attrs)], compute_dtype=cd).finalize()
    if kind == "wgrad":
        return OpGraph([ConvWgrad("wg", {"X": x, "DY": y}, {"DW": w}, **attrs)], compute_dtype=cd).finalize()
    if not epilogue:
        return OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": y}, **attrs)], compute_dtype=cd).finalize()
    v1, v2 = TensorDesc(10, is_virtual=True, name="v10"), TensorDesc(11, is_virtual=True, name="v11")
    return OpGraph([ConvFprop("conv", {"X": x, "W": w}, {"Y": v1}, **attrs),
                    Pointwise("bias", {"X": v1, "B": _t(3, (1, k, 1, 1), dt, nhwc)}, {"Y": v2},
                              mode=PM.CUDNN_POINTWISE_ADD),
                    Pointwise("relu", {"X": v2}, {"Y": y}, mode=PM.CUDNN_POINTWISE_RELU_FWD)],
                   compute_dtype=cd).finalize()


def draw(rng):
    """A random problem: (kind, n, c, h, k, r, stride, nhwc, dtype, epilogue)."""
    r = int(rng.choice([1, 3, 7]))
    return (str(rng.choice(["fprop", "dgrad", "wgrad"])), int(rng.choice([1, 2, 3, 8, 17, 32, 64, 128])),
            int(rng.choice([3, 16, 24, 64, 128, 256, 512])), int(rng.choice([7, 8, 13, 14, 28, 56, 112, 224])),
            int(rng.choice([16, 32, 64, 128, 256, 512])), r, int(rng.choice([1, 2])), bool(rng.integers(2)),
            str(rng.choice(list(DTYPES))), bool(rng.integers(2)))


#: ResNet-50-like layers and edge cases, always checked
FIXED = [("fprop", 32, 128, 28, 128, 3, 1, True, "f32", True), ("fprop", 32, 64, 56, 256, 1, 1, True, "f32", True),
         ("fprop", 32, 256, 56, 128, 3, 2, True, "f32", True), ("fprop", 32, 3, 224, 64, 7, 2, True, "f32", True),
         ("dgrad", 8, 64, 28, 64, 3, 2, False, "f16", False), ("wgrad", 32, 64, 56, 64, 3, 1, True, "f32", False),
         ("wgrad", 1, 16, 7, 16, 1, 1, False, "bf16", False), ("dgrad", 128, 512, 7, 512, 1, 1, True, "bf16", False),
         ("fprop", 1, 16, 7, 16, 3, 1, False, "f32", False), ("wgrad", 128, 3, 224, 64, 7, 2, True, "f16", False),
         # 1x1 wgrad, each conv_gemm_1x1 route: one GEMM (NHWC), per-image sum (NCHW, H*W % 8 == 0),
         # pixels-last copies (NCHW 7x7; stride 2), stride 2 unsupported (fp16), misaligned channels
         ("wgrad", 32, 256, 56, 64, 1, 1, True, "f32", False), ("wgrad", 32, 64, 56, 256, 1, 1, False, "f32", False),
         ("wgrad", 32, 512, 7, 2048, 1, 1, False, "f32", False), ("wgrad", 8, 256, 56, 512, 1, 2, False, "f32", False),
         ("wgrad", 8, 256, 56, 512, 1, 2, True, "f16", False), ("wgrad", 4, 3, 28, 64, 1, 1, True, "f32", False),
         ("wgrad", 2, 16, 7, 16, 1, 1, False, "f16", False), ("wgrad", 16, 256, 14, 256, 1, 1, False, "f32", False)]
