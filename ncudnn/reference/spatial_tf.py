"""Reference for the spatial transformer: cudnnSpatialTfGridGenerator* and cudnnSpatialTfSampler*.

These are PyTorch's affine_grid / grid_sample with align_corners=True, bilinear, zero padding
(the configuration PyTorch hands to cuDNN), 2-D, NCHW:

* grid generator: theta (N, 2, 3) -> grid (N, H, W, 2) with
  grid[n, h, w] = theta[n] @ (xs_w, ys_h, 1),  xs_w = -1 + 2w / (W - 1),  ys_h = -1 + 2h / (H - 1)
  (a size-1 dim has the single coordinate -1).
* sampler: x (N, C, Hi, Wi), grid (N, H, W, 2) -> y (N, C, H, W), grid[..., 0] the x (width)
  coordinate: ix = (gx + 1) / 2 * (Wi - 1), iy = (gy + 1) / 2 * (Hi - 1); bilinear over the four
  neighbours floor / floor + 1, neighbours outside the image contribute 0.
* backward: dtheta = sum_{h,w} dgrid[n, h, w] (outer) (xs_w, ys_h, 1); sampler backward gives dx
  (the bilinear weights scattered) and dgrid (derivative of y in the sampling point, zero-padded
  neighbours included, per the chain rule of the formulas above).
"""
import numpy as np

from ._util import f64

__all__ = ["spatial_tf_grid_forward", "spatial_tf_grid_backward", "spatial_tf_sampler_forward",
           "spatial_tf_sampler_backward"]


def _base(H, W):
    xs = -1.0 + 2.0 * np.arange(W) / (W - 1) if W > 1 else np.full(W, -1.0)
    ys = -1.0 + 2.0 * np.arange(H) / (H - 1) if H > 1 else np.full(H, -1.0)
    b = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], np.ones((H, W))), axis=-1)
    return b  # (H, W, 3)


def spatial_tf_grid_forward(theta, H, W):
    """theta (N, 2, 3) -> grid (N, H, W, 2)."""
    return np.einsum("hwk,nck->nhwc", _base(H, W), f64(theta))


def spatial_tf_grid_backward(dgrid):
    """dgrid (N, H, W, 2) -> dtheta (N, 2, 3)."""
    dgrid = f64(dgrid)
    return np.einsum("hwk,nhwc->nck", _base(*dgrid.shape[1:3]), dgrid)


def _corners(x_shape, grid):
    Hi, Wi = x_shape[2:]
    ix = (grid[..., 0] + 1.0) / 2.0 * (Wi - 1)
    iy = (grid[..., 1] + 1.0) / 2.0 * (Hi - 1)
    x0, y0 = np.floor(ix).astype(np.int64), np.floor(iy).astype(np.int64)
    fx, fy = ix - x0, iy - y0
    out = []
    for dy_, wy, dwy in ((0, 1 - fy, -1.0), (1, fy, 1.0)):
        for dx_, wx, dwx in ((0, 1 - fx, -1.0), (1, fx, 1.0)):
            yy, xx = y0 + dy_, x0 + dx_
            ok = (yy >= 0) & (yy < Hi) & (xx >= 0) & (xx < Wi)
            # weight, d weight / d ix, d weight / d iy
            out.append((np.clip(yy, 0, Hi - 1), np.clip(xx, 0, Wi - 1), ok, wy * wx, wy * dwx,
                        dwy * wx))
    return out, (Wi - 1) / 2.0, (Hi - 1) / 2.0


def spatial_tf_sampler_forward(x, grid):
    """Bilinear sampling of x (N, C, Hi, Wi) at grid (N, H, W, 2) -> y (N, C, H, W)."""
    x, grid = f64(x), f64(grid)
    N = x.shape[0]
    n = np.arange(N)[:, None, None]
    y = np.zeros((N, x.shape[1]) + grid.shape[1:3])
    for yy, xx, ok, w, _, _ in _corners(x.shape, grid)[0]:
        v = x[n, :, yy, xx]  # (N, H, W, C)
        y += np.moveaxis(np.where(ok[..., None], v * w[..., None], 0.0), -1, 1)
    return y


def spatial_tf_sampler_backward(x, grid, dy):
    """-> (dx (N, C, Hi, Wi), dgrid (N, H, W, 2)) for y = spatial_tf_sampler_forward(x, grid)."""
    x, grid, dy = f64(x), f64(grid), f64(dy)
    N, C = x.shape[:2]
    n = np.arange(N)[:, None, None]
    dx = np.zeros_like(x)
    dgrid = np.zeros(grid.shape)
    corners, sx, sy = _corners(x.shape, grid)
    g = np.moveaxis(dy, 1, -1)  # (N, H, W, C)
    for yy, xx, ok, w, dwx, dwy in corners:
        v = np.where(ok[..., None], x[n, :, yy, xx], 0.0)
        contrib = np.where(ok[..., None], g * w[..., None], 0.0)
        np.add.at(dx, (np.broadcast_to(n, yy.shape), slice(None), yy, xx), contrib)
        gv = (g * v).sum(-1)
        dgrid[..., 0] += gv * dwx * sx
        dgrid[..., 1] += gv * dwy * sy
    return dx, dgrid
