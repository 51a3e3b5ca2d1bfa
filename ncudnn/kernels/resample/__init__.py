"""Resample kernels (pooling, nearest, bilinear): the generic any-layout kernels (generic), the direct
fast path (direct) and the register-tiled 2D pooling kernels (tile); their 16-byte helpers are
:mod:`ncudnn.kernels.primitives.vec`."""
