"""Finalize checks of block-scale quantize / dequantize.

The scale tensor has X's rank; along exactly one (the blocked) dimension it is X's size divided by
BLOCK_SIZE, elsewhere equal. Quantized data and scale types pair as in MXFP8 / NVFP4.
"""
from ...types import cudnnBackendAttributeName_t as A
from ...types import cudnnBackendDescriptorType_t as D
from ...types import cudnnDataType_t as DT
from ..report import bad
from .tensor import tensor_of

#: quantized data type -> scale data types it can be paired with.
SCALE_TYPES = {
    DT.CUDNN_DATA_FP8_E4M3: (DT.CUDNN_DATA_FP8_E8M0,),
    DT.CUDNN_DATA_FP8_E5M2: (DT.CUDNN_DATA_FP8_E8M0,),
    DT.CUDNN_DATA_FP4_E2M1: (DT.CUDNN_DATA_FP8_E8M0, DT.CUDNN_DATA_FP8_E4M3),
}


def _check_shapes(d, data, data_name, scale, scale_name, block):
    if block <= 0:
        bad(d, None, f"block size {block} is not positive")
    if scale.rank != data.rank:
        bad(d, scale_name, f"{scale.rank} dimensions, the data has {data.rank}")
    blocked = [i for i, (x, s) in enumerate(zip(data.dims, scale.dims)) if x != s]
    if len(blocked) > 1 or (blocked and scale.dims[blocked[0]] * block != data.dims[blocked[0]]):
        bad(d, scale_name, f"dims {list(scale.dims)} do not match data {list(data.dims)} in blocks of {block}")


def _check_pair(d, data, data_name, scale, scale_name):
    allowed = SCALE_TYPES.get(data.dtype)
    if allowed is None:
        bad(d, data_name, f"{data.dtype.name} is not a block-scaled data type")
    if scale.dtype not in allowed:
        bad(d, scale_name, f"{scale.dtype.name} cannot scale {data.dtype.name} "
            f"(expected {' or '.join(t.name for t in allowed)})")


def finalize_quantize(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC)
    s = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC)
    block = d.value(A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE)
    if x.dims != y.dims:
        bad(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC, f"dims {list(y.dims)} differ from X {list(x.dims)}")
    _check_shapes(d, x, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_XDESC, s,
                  A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC, block)
    _check_pair(d, y, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC, s,
                A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC)


def finalize_dequantize(d):
    x = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC)
    y = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC)
    s = tensor_of(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC)
    block = d.value(A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE)
    if x.dims != y.dims:
        bad(d, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC, f"dims {list(y.dims)} differ from X {list(x.dims)}")
    _check_shapes(d, x, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC, s,
                  A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC, block)
    _check_pair(d, x, A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC, s,
                A.CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC)


FINALIZERS = {
    D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR: finalize_quantize,
    D.CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR: finalize_dequantize,
}
