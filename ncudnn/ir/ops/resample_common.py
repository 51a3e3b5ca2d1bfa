"""Attributes and output size of resampling (pooling, nearest, bilinear), as in
CUDNN_BACKEND_RESAMPLE_DESCRIPTOR. X = [N, C, *spatial]."""
from ..node import REQUIRED
from ...types import cudnnNanPropagation_t, cudnnPaddingMode_t, cudnnResampleMode_t, cudnnStatus_t

S = cudnnStatus_t
RM = cudnnResampleMode_t

RESAMPLE_ATTRS = {
    "mode": REQUIRED,
    "spatial_dims": REQUIRED,
    "window": REQUIRED,
    "stride": REQUIRED,
    "pre_padding": REQUIRED,
    "post_padding": REQUIRED,
    "padding_mode": cudnnPaddingMode_t.CUDNN_ZERO_PAD,
    "nan_propagation": cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN,
    "comp_type": None,
    "alpha": 1.0,
    "beta": 0.0,
}


class ResampleGeometry:
    def check_resample_attrs(self):
        self.mode = RM(int(self.mode))
        n = self.spatial_dims
        if not isinstance(n, int) or not 1 <= n <= 3:
            self.fail(S.CUDNN_STATUS_NOT_SUPPORTED, "spatial_dims", f"{n!r}: 1 to 3 supported")
        for f in ("window", "stride", "pre_padding", "post_padding"):
            v = getattr(self, f)
            if v is None or len(v) != n:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, f, f"needs {n} elements")
            setattr(self, f, tuple(v))
        if any(w <= 0 for w in self.window) or any(s <= 0 for s in self.stride):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "window/stride", "must be positive")
        self.padding_mode = cudnnPaddingMode_t(int(self.padding_mode))

    def out_dims(self, x_dims):
        out = []
        for i in range(self.spatial_dims):
            num = x_dims[2 + i] + self.pre_padding[i] + self.post_padding[i] - self.window[i]
            o = int(num // self.stride[i]) + 1
            if o < 1:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "X", f"spatial dim {i}: output {o} < 1")
            out.append(o)
        return (x_dims[0], x_dims[1], *out)
