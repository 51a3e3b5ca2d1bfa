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


def ada_dims(x_dims, scale_dims):
    """Adaptive layer norm (cudnn-frontend's ``adalayernorm``): ``(stats dims, None)`` or ``(None, why)``.

    SCALE (and BIAS, DSCALE, DBIAS) has X's rank; its dim 0 is 1 (shared) or X's batch (one scale row per batch
    entry), every other dim is 1 (broadcast: a row axis) or X's (a normalized axis). X is normalized over the
    axes where SCALE is not 1, separately for every index of the others: X [B, S, C] with SCALE [B, 1, C]
    normalizes each of the B * S rows of C and gives statistics [B, S, 1]; SCALE [1, S, C] is plain layer norm
    (statistics [B, 1, 1]). As cudnn-frontend infers it, stats dims = X's where SCALE is 1, else 1."""
    x_dims, scale_dims = tuple(x_dims), tuple(scale_dims)
    if len(scale_dims) != len(x_dims):
        return None, f"dims {scale_dims}: rank {len(scale_dims)}, X has rank {len(x_dims)}"
    if len(x_dims) < 2:
        return None, "X needs a batch dim and at least one more"
    if scale_dims[0] not in (1, x_dims[0]):
        return None, f"dims {scale_dims}: dim 0 must be 1 or X's batch {x_dims[0]}"
    for i in range(1, len(x_dims)):
        if scale_dims[i] not in (1, x_dims[i]):
            return None, f"dims {scale_dims}: dim {i} must be 1 or X's {x_dims[i]}"
    return (x_dims[0],) + tuple(d if s == 1 else 1 for d, s in zip(x_dims[1:], scale_dims[1:])), None
