"""The knobs of engine "norm_rows" as its forward (rows_fwd), backward (rows_bwd) and engine (rows) read them,
and the small layout helpers they share.
"""
from ...types import cudnnBackendKnobType_t

__all__ = ["KC", "KW", "KS", "block_size", "tile_rows", "load_size", "kernel_cfg", "cta_count", "stages",
           "packed_strides_of", "kprim_itemsize"]

K = cudnnBackendKnobType_t
KC, KW, KS = K.CUDNN_KNOB_TYPE_KERNEL_CFG, K.CUDNN_KNOB_TYPE_CTA_COUNT, K.CUDNN_KNOB_TYPE_STAGES


def block_size(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0)


def tile_rows(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0)


def load_size(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0)


def kernel_cfg(cfg):
    return cfg.get(KC, 0)


def cta_count(cfg):
    return cfg.get(KW, 0)


def stages(cfg):
    """Row groups a fused backward block keeps in registers (STAGES 0: the kernel layer's choice)."""
    return cfg.get(KS, 0)


def packed_strides_of(dims):
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def kprim_itemsize(dt):
    from ...kernels.runtime.dtypes import storage_dtype
    return storage_dtype(dt).itemsize
