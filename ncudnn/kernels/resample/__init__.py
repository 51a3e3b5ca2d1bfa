"""Resample kernels (pooling, nearest, bilinear): the generic any-layout kernels (generic), the direct
fast path (direct), the register-tiled 2D pooling kernels (tile) and their 16-byte helpers (vec)."""
