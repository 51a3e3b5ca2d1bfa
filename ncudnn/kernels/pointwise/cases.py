"""The fused pointwise kernels' sm_90 compile cases (dense, broadcast, packed and vectorized layouts: no spills,
no local memory, at most 64 registers or the launch bounds' share).

Imported only by the compile check (:mod:`ncudnn.kernels.runtime.compile_check` loads every family's
``cases`` module); importing a kernel module registers and builds nothing.
"""
from ...types import cudnnPointwiseMode_t as PM
from ..runtime.compile_check import register_compile_case
from .fused import (NodeSpec, OutputSpec, PointwiseSpec, TensorSpec, build_pointwise, contiguous_strides,
                    kernel_signature)


def register_cases():
    nchw = (32, 64, 56, 56)
    cs_ = contiguous_strides(nchw)
    cases = {
        "pointwise_dense_bf16_add_relu_scale": PointwiseSpec(
            nchw, (TensorSpec("bfloat16", cs_), TensorSpec("bfloat16", cs_),
                   TensorSpec("float32", (0, 0, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
             NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
            (OutputSpec(5, "bfloat16", cs_),)),
        "pointwise_nchw_bias_gelu_fp16": PointwiseSpec(
            nchw, (TensorSpec("float16", cs_), TensorSpec("float32", (0, 1, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
            (OutputSpec(3, "float16", cs_),)),
        "pointwise_dense_f64_swish_bwd": PointwiseSpec(
            (1 << 20,), (TensorSpec("float64", (1,)), TensorSpec("float64", (1,))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_SWISH_BWD, (0, 1)),),
            (OutputSpec(2, "float64", (1,)),)),
        "pointwise_packed_bf16_add_relu_scale": PointwiseSpec(
            nchw, (TensorSpec("bfloat16", cs_), TensorSpec("bfloat16", cs_),
                   TensorSpec("float32", (0, 0, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
             NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
            (OutputSpec(5, "bfloat16", cs_),), pack=2),
        "pointwise_dense_fp8_cast": PointwiseSpec(
            (1 << 20,), (TensorSpec("float32", (1,)),),
            (NodeSpec.make(PM.CUDNN_POINTWISE_IDENTITY, (0,)),),
            (OutputSpec(1, "float8_e4m3fn", (1,), saturate=True),)),
    }
    nhwc = (56 * 56 * 256, 1, 56 * 256, 256)
    big = (32, 256, 56, 56)
    f32 = TensorSpec("float32", contiguous_strides((1 << 20,)))
    cases.update({
        "pointwise_vec_f32_relu": PointwiseSpec(
            (1 << 20,), (f32,), (NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (0,)),),
            (OutputSpec(1, "float32", (1,)),), vec=4),
        "pointwise_vec_nhwc_bias_relu_f32": PointwiseSpec(
            big, (TensorSpec("float32", nhwc), TensorSpec("float32", (0, 1, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (2,))),
            (OutputSpec(3, "float32", nhwc),), vec=4),
        "pointwise_vec_nchw_bias_gelu_fp16": PointwiseSpec(
            nchw, (TensorSpec("float16", cs_), TensorSpec("float32", (0, 1, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
            (OutputSpec(3, "float16", cs_),), vec=4),
        "pointwise_vec_bf16_add_relu_scale": PointwiseSpec(
            nchw, (TensorSpec("bfloat16", cs_), TensorSpec("bfloat16", cs_),
                   TensorSpec("float32", (0, 0, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
             NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
            (OutputSpec(5, "bfloat16", cs_),), vec=8),
        "pointwise_vec1_nhwc_bias_relu_f32": PointwiseSpec(
            big, (TensorSpec("float32", nhwc), TensorSpec("float32", (0, 1, 0, 0))),
            (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
             NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (2,))),
            (OutputSpec(3, "float32", nhwc),)),
    })
    rows = (8192, 4096)   # the bench's bias + GELU, with the launch bounds the engine gives it
    cases["pointwise_vec_row_bias_gelu_f32_bounded"] = PointwiseSpec(
        rows, (TensorSpec("float32", contiguous_strides(rows)), TensorSpec("float32", (0, 1))),
        (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)), NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
        (OutputSpec(3, "float32", contiguous_strides(rows)),), block=128, unroll=2, vec=4, waves=0,
        min_blocks=12)
    for name, spec in cases.items():
        register_compile_case(name, build_pointwise(spec).kernel, kernel_signature(spec),
                              max_local_bytes=0,
                              max_registers=min(64, 65536 // (spec.block * spec.min_blocks)) if spec.min_blocks else 64)


register_cases()


def register_pack_cases():
    """The packing kernel of multi-operand epilogues (kernels/pointwise/pack.py)."""
    from .pack import make_pack, signature
    for src in ("float32", "float16", "bfloat16", "float64"):
        dst = "float64" if src == "float64" else "float32"
        register_compile_case(f"pointwise_pack_vector_{src}", make_pack(src, dst), signature(src, dst),
                              max_registers=32, max_local_bytes=0)


register_pack_cases()
