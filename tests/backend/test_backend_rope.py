"""The backend ROPE_FWD / ROPE_BWD operation descriptors (issue #28): rotary position embedding over the
trailing ROPE_DIM columns of the head dimension (non-interleaved halves, raw angles FREQS, OUTPUT_SCALE on
the whole output, the backward rotating by -theta). Round trips, bad input with the documented status and
the attribute named, execution against the float64 oracle (fresh random inputs, poisoned outputs)."""
import numpy as np
import pytest
from numba import cuda

from backend_build import A, D, S, T, create, expect, finalize, get, graph, make, ok, set_attr, tensor
from ncudnn.testing import assert_close, random
from test_backend_execute_ops import poisoned, run

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
X = [2, 2, 3, 8]
NAMES = {"FWD": ("XDESC", "YDESC"), "BWD": ("DYDESC", "DXDESC")}


def prefix(kind):
    return f"CUDNN_ATTR_OPERATION_ROPE_{kind}_"


def rope_op(kind="FWD", rope_dim=None, freqs=None, scale=None, x=None, y=None, fin=True):
    P, (xn, yn) = prefix(kind), NAMES[kind]
    attrs = {A[P + xn]: (DESC, x or tensor(1, X)), A[P + yn]: (DESC, y or tensor(2, X)),
             A[P + "FREQSDESC"]: (DESC, freqs or tensor(3, [1, 1, X[2], rope_dim or X[-1]]))}
    if scale is not None:
        attrs[A[P + "OUTPUT_SCALE"]] = (T.CUDNN_TYPE_FLOAT, scale)
    if rope_dim is not None:
        attrs[A[P + "ROPE_DIM"]] = (T.CUDNN_TYPE_INT64, rope_dim)
    return make(D[f"CUDNN_BACKEND_OPERATION_ROPE_{kind}_DESCRIPTOR"], attrs, fin)


def oracle(x, f, rope_dim, alpha, forward=True):
    x, f = x.astype(np.float64), f.astype(np.float64)
    r = rope_dim or x.shape[-1]
    h, nope = r // 2, x.shape[-1] - r
    lo, hi = x[..., nope:nope + h], x[..., nope + h:]
    sign = 1.0 if forward else -1.0
    y_lo = lo * np.cos(f[..., :h]) - sign * hi * np.sin(f[..., :h])
    y_hi = hi * np.cos(f[..., h:]) + sign * lo * np.sin(f[..., h:])
    return alpha * np.concatenate([x[..., :nope], y_lo, y_hi], axis=-1)


@pytest.mark.parametrize("kind", ["FWD", "BWD"])
def test_round_trip_and_defaults(kind):
    P = prefix(kind)
    d = rope_op(kind)
    assert get(d, A[P + "OUTPUT_SCALE"], T.CUDNN_TYPE_FLOAT) == (1, [1.0])
    assert get(d, A[P + "ROPE_DIM"], T.CUDNN_TYPE_INT64) == (1, [0])
    d = rope_op(kind, rope_dim=4, scale=0.5)
    assert get(d, A[P + "OUTPUT_SCALE"], T.CUDNN_TYPE_FLOAT) == (1, [0.5])
    assert get(d, A[P + "ROPE_DIM"], T.CUDNN_TYPE_INT64) == (1, [4])
    n, (f,) = get(d, A[P + "FREQSDESC"], DESC, 1)
    assert n == 1 and f.type == D.CUDNN_BACKEND_TENSOR_DESCRIPTOR


@pytest.mark.parametrize("kind", ["FWD", "BWD"])
@pytest.mark.parametrize("rope_dim", [None, 4])
def test_executes_against_the_oracle(rng, kind, rope_dim):
    fdims = [1, 1, X[2], rope_dim or X[-1]]
    x, f = random(rng, X), random(rng, fdims)
    y = poisoned(X)
    run(graph([rope_op(kind, rope_dim=rope_dim, scale=0.5)]), {1: cuda.to_device(x), 2: y, 3: cuda.to_device(f)})
    assert_close(y.copy_to_host(), oracle(x, f, rope_dim, 0.5, kind == "FWD"), "float32")


def test_per_batch_angles(rng):
    """FREQS may vary along any dimension of X (here batch and sequence)."""
    fdims = [X[0], 1, X[2], X[-1]]
    x, f = random(rng, X), random(rng, fdims)
    y = poisoned(X)
    run(graph([rope_op(freqs=tensor(3, fdims))]), {1: cuda.to_device(x), 2: y, 3: cuda.to_device(f)})
    assert_close(y.copy_to_host(), oracle(x, f, None, 1.0), "float32")


def test_backward_undoes_forward(rng):
    """ROPE_BWD(ROPE_FWD(x)) = alpha^2 x for angles that are one rotation per pair (the two halves of
    FREQS equal, as models build them): one graph, the rotated tensor virtual between the two."""
    theta = random(rng, [1, 1, X[2], 2])
    x, f = random(rng, X), np.concatenate([theta, theta], axis=-1)
    v = tensor(4, X, virtual=True)
    freqs = tensor(3, [1, 1, X[2], 4])
    fwd = rope_op("FWD", rope_dim=4, scale=2.0, y=v, freqs=freqs)
    bwd = rope_op("BWD", rope_dim=4, scale=0.5, x=v, freqs=freqs)
    y = poisoned(X)
    run(graph([fwd, bwd]), {1: cuda.to_device(x), 2: y, 3: cuda.to_device(f)})
    assert_close(y.copy_to_host(), x.astype(np.float64), "float32")


def test_bad_input():
    P = prefix("FWD")
    d = create(D.CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR)
    expect(set_attr(d, A[P + "OUTPUT_SCALE"], T.CUDNN_TYPE_INT64, 1), S.CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
           A[P + "OUTPUT_SCALE"])
    expect(set_attr(d, A[P + "ROPE_DIM"], T.CUDNN_TYPE_INT64, [2, 4]), S.CUDNN_STATUS_BAD_PARAM, A[P + "ROPE_DIM"],
           "elementCount 2")
    expect(set_attr(d, A.CUDNN_ATTR_OPERATION_ROPE_BWD_DYDESC, DESC, tensor(1, X)), S.CUDNN_STATUS_BAD_PARAM,
           "CUDNN_ATTR_OPERATION_ROPE_BWD_DYDESC", "ROPE_BWD")
    ok(set_attr(d, A[P + "XDESC"], DESC, tensor(1, X)))
    ok(set_attr(d, A[P + "YDESC"], DESC, tensor(2, X)))
    expect(finalize(d), S.CUDNN_STATUS_BAD_PARAM, "required attribute(s) not set", A[P + "FREQSDESC"])
    expect(finalize(rope_op(rope_dim=3, freqs=tensor(3, [1, 1, 3, 3]), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           A[P + "ROPE_DIM"], "even")
    expect(finalize(rope_op(rope_dim=10, fin=False)), S.CUDNN_STATUS_BAD_PARAM, A[P + "ROPE_DIM"])
    expect(finalize(rope_op(rope_dim=4, freqs=tensor(3, [1, 1, 3, 8]), fin=False)), S.CUDNN_STATUS_BAD_PARAM,
           A[P + "FREQSDESC"], "[..., 4]")
    expect(finalize(rope_op(freqs=tensor(3, [1, 1, 2, 8]), fin=False)), S.CUDNN_STATUS_BAD_PARAM, A[P + "FREQSDESC"])
    expect(finalize(rope_op(y=tensor(2, [2, 2, 3, 4]), fin=False)), S.CUDNN_STATUS_BAD_PARAM, A[P + "YDESC"], str(X))
