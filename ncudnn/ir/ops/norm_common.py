"""Statistics shapes of the normalization modes (X = [N, C, *spatial] or [B, S, H] rows)."""
from ...types import cudnnBackendNormMode_t

NM = cudnnBackendNormMode_t


def stats_dims(mode, x_dims):
    """Dims of mean / inverse variance for ``mode``, and of scale/bias."""
    n = len(x_dims)
    if mode == NM.CUDNN_BATCH_NORM:
        st = (1, x_dims[1]) + (1,) * (n - 2)
        return st, st
    if mode == NM.CUDNN_INSTANCE_NORM:
        return (x_dims[0], x_dims[1]) + (1,) * (n - 2), (1, x_dims[1]) + (1,) * (n - 2)
    # layer / RMS / ada-layer: per sample over all non-batch dims; scale over the normalized dims
    return (x_dims[0],) + (1,) * (n - 1), (1,) + tuple(x_dims[1:])
