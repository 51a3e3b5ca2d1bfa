"""Geometry shared by the three convolution nodes (fprop, dgrad, wgrad).

Layout of dims, as in cuDNN: X = [N, C, *spatial], W = [K, C/groups, *filter], Y = [N, K, *out];
groups are implied by C_x / C_w. Attributes mirror CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR.
"""
from ..node import REQUIRED
from ...types import cudnnConvolutionMode_t, cudnnStatus_t

S = cudnnStatus_t
CONV_ATTRS = {
    "spatial_dims": REQUIRED,
    "mode": cudnnConvolutionMode_t.CUDNN_CROSS_CORRELATION,
    "stride": REQUIRED,
    "pre_padding": REQUIRED,
    "post_padding": REQUIRED,
    "dilation": REQUIRED,
    "alpha": 1.0,
    "beta": 0.0,
}


def out_size(in_size, f, stride, pre, post, dil):
    """The output size of one spatial dim: the package's one formula for it (the IR's shape inference,
    the backend's finalize checks and, through :meth:`ConvGeometry.output_spatial`, the engines)."""
    return (in_size + pre + post - ((f - 1) * dil + 1)) // stride + 1


def out_spatial(x_spatial, w_spatial, stride, pre, post, dil):
    """:func:`out_size` of every spatial dim (a tuple)."""
    return tuple(out_size(x_spatial[i], w_spatial[i], stride[i], pre[i], post[i], dil[i])
                 for i in range(len(x_spatial)))


class ConvGeometry:
    """Pre-validation of the convolution attributes and the X/W/Y shape relation."""

    def check_conv_attrs(self):
        n = self.spatial_dims
        if not isinstance(n, int) or not 1 <= n <= 3:
            self.fail(S.CUDNN_STATUS_NOT_SUPPORTED, "spatial_dims", f"{n!r}: 1 to 3 spatial dims supported")
        for field in ("stride", "pre_padding", "post_padding", "dilation"):
            v = getattr(self, field)
            if v is None or len(v) != n:
                self.fail(S.CUDNN_STATUS_BAD_PARAM, field,
                          f"needs {n} elements (spatial_dims), got {None if v is None else len(v)}")
            setattr(self, field, tuple(int(x) for x in v))
        if any(s < 1 for s in self.stride) or any(d < 1 for d in self.dilation):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "stride/dilation", "must be >= 1")
        if any(p < 0 for p in self.pre_padding + self.post_padding):
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "padding", "must be >= 0")
        self.mode = cudnnConvolutionMode_t(int(self.mode))

    def geometry(self, x_dims, w_dims, x_port, w_port):
        """Check X against W and return (groups, expected Y dims)."""
        n = self.spatial_dims
        if len(x_dims) != n + 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, x_port,
                      f"{len(x_dims)} dims, expected {n + 2} (N, C and {n} spatial)")
        if len(w_dims) != n + 2:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, w_port,
                      f"{len(w_dims)} dims, expected {n + 2} (K, C/groups and {n} filter)")
        c, cg, k = x_dims[1], w_dims[1], w_dims[0]
        if c % cg:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, w_port,
                      f"input channels {c} not a multiple of filter channels {cg}")
        groups = c // cg
        if k % groups:
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, w_port,
                      f"output channels {k} not divisible by groups {groups}")
        out = []
        for i in range(n):
            o = out_size(x_dims[2 + i], w_dims[2 + i], self.stride[i], self.pre_padding[i],
                         self.post_padding[i], self.dilation[i])
            if o < 1:
                self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, x_port,
                          f"spatial dim {i}: output size {o} < 1 for input {x_dims[2 + i]}, "
                          f"filter {w_dims[2 + i]}")
            out.append(o)
        return groups, (x_dims[0], k, *out)

    def output_spatial(self):
        """The output's spatial dims as X, W and the attributes give them (:func:`out_spatial`; what the
        engines' geometry reads), remembered on the node per (X dims, W dims, stride, paddings, dilation)."""
        x, w, _ = self.conv_tensors()
        key = (tuple(x.dims), tuple(w.dims), tuple(self.stride), tuple(self.pre_padding), tuple(self.post_padding),
               tuple(self.dilation))
        hit = self.__dict__.get("_output_spatial")
        if hit is None or hit[0] != key:
            hit = self.__dict__["_output_spatial"] = (key, out_spatial(key[0][2:], key[1][2:], *key[2:]))
        return hit[1]

    def flops(self):
        """2 * N * K * P*Q * C/groups * R*S (multiply-adds counted twice)."""
        x, w, y = self.conv_tensors()
        import math
        return 2 * math.prod(y.dims) * math.prod(w.dims[1:])
