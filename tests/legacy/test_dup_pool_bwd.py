"""Legacy max-pooling backward without the extra forward: where the resample engine's gather can
recompute the window winners from x (pooling.recomputes_from_x), dx is bit-for-bit what the former
forward-with-index path gives (ties and NaNs included) and matches the float64 oracle; other geometries
keep the index forward. Simulator, fresh inputs, poisoned outputs."""
import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn import reference as R
from ncudnn.legacy import pooling
from ncudnn.testing import assert_close

from .conftest import dev, last_lowered, poisoned, tdesc

PM = ncudnn.cudnnPoolingMode_t
OK = ncudnn.cudnnStatus_t.CUDNN_STATUS_SUCCESS


def _backward(p, x, dy, ys, index_path, monkeypatch):
    """dx (host) of one cudnnPoolingBackward on a fresh handle, and whether its graph ran a forward;
    ``index_path``: as before recomputes_from_x (a forward writes the index first)."""
    if index_path:
        monkeypatch.setattr(pooling, "recomputes_from_x", lambda q: False)
    st, h = ncudnn.cudnnCreate()
    try:
        dx = poisoned(x.shape)
        ret = L.cudnnPoolingBackward(h, p, 1.0, tdesc(ys), dev(np.zeros(ys, np.float32)), tdesc(ys), dev(dy),
                                     tdesc(x.shape), dev(x), 0.0, tdesc(x.shape), dx)
        assert ret == (OK,), ncudnn.cudnnGetLastErrorString()
        ops = {n.OP for n in last_lowered(h).graph.nodes}
        return dx.copy_to_host(), "resample_fwd" in ops
    finally:
        ncudnn.cudnnDestroy(h)


@pytest.mark.parametrize("mode,nan", [(PM.CUDNN_POOLING_MAX, 0), (PM.CUDNN_POOLING_MAX_DETERMINISTIC, 1)],
                         ids=["max", "det_propagate"])
@pytest.mark.parametrize("geom", [((3, 2), (1, 0), (2, 2)), ((2, 2), (0, 0), (1, 1)), ((7, 6), (0, 0), (1, 1))],
                         ids=["3x2s2", "2x2s1", "7x6s1_index"])
def test_dup_pool_bwd_from_x_matches_index_path(rng, monkeypatch, mode, nan, geom):
    win, pad, stride = geom
    _, p = L.cudnnCreatePoolingDescriptor()
    assert L.cudnnSetPooling2dDescriptor(p, mode, nan, *win, *pad, *stride) == (OK,)
    shape = (2, 3, 7, 6)
    x = rng.integers(-2, 3, shape).astype(np.float32)          # many ties: the first maximum must win
    x.reshape(-1)[rng.choice(x.size, 2, replace=False)] = np.nan
    ys = tuple(L.cudnnGetPooling2dForwardOutputDim(p, tdesc(shape))[1:])
    dy = rng.uniform(-1, 1, ys).astype(np.float32)
    direct = pooling.recomputes_from_x(p)
    assert direct == (geom[0] != (7, 6))                      # 42 taps x 42 covering outputs: too large
    new, fwd_new = _backward(p, x, dy, ys, False, monkeypatch)
    old, fwd_old = _backward(p, x, dy, ys, True, monkeypatch)
    assert fwd_old and fwd_new == (not direct)
    assert np.array_equal(new, old, equal_nan=True)
    kw = dict(window=win, stride=stride, pre_pad=pad, post_pad=pad, padding_mode=ncudnn.CUDNN_NEG_INF_PAD,
              nan_propagation=ncudnn.cudnnNanPropagation_t(nan))
    assert_close(new, R.resample_backward(dy, "MAXPOOL", x_shape=shape, x=x, **kw), "float32")
