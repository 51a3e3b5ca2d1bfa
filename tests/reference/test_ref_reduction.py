"""reference.reduction against explicit Python loops over the reduced elements."""
import math

import numpy as np
import pytest

from ncudnn.reference import reduction, reduction_indices

OPS = {
    "ADD": sum, "MUL": math.prod, "MIN": min, "MAX": max,
    "AMAX": lambda e: max(abs(v) for v in e), "AVG": lambda e: sum(e) / len(e),
    "NORM1": lambda e: sum(abs(v) for v in e), "NORM2": lambda e: math.sqrt(sum(v * v for v in e)),
    "MUL_NO_ZEROS": lambda e: math.prod(v for v in e if v != 0),
}


def _loop(op, x, out_shape):
    out = np.empty(out_shape)
    for oi in np.ndindex(*out_shape):
        elems = []
        for xi in np.ndindex(*x.shape):
            ok = all(o == i if m == n else (m == 1 or i // (n // m) == o)
                     for o, i, m, n in zip(oi, xi, out_shape, x.shape))
            if ok:
                elems.append(float(x[xi]))
        out[oi] = OPS[op](elems)
    return out


CASES = [((2, 3, 4), (1, 3, 1)), ((2, 3, 4), (2, 1, 4)), ((2, 3, 4), (1, 1, 1)),
         ((2, 3, 4), (2, 3, 4)), ((4, 6, 2), (4, 2, 1))]  # last: grouped (GQA-style) axis


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shapes", CASES, ids=str)
def test_matches_loops(op, shapes, rng):
    xs, os_ = shapes
    x = rng.uniform(-2, 2, size=xs)
    x.flat[rng.integers(0, x.size)] = 0.0
    got = reduction("CUDNN_REDUCE_TENSOR_" + op if op != "ADD" else op, x, os_)
    assert got.shape == os_
    np.testing.assert_allclose(got, _loop(op, x, os_), rtol=1e-12, atol=1e-300)


def test_hand_values():
    x = np.array([[1.0, -4.0], [0.0, 3.0]])
    assert reduction("NORM2", x, (1, 1))[0, 0] == pytest.approx(math.sqrt(26))
    np.testing.assert_array_equal(reduction("AMAX", x, (2, 1)), [[4.0], [3.0]])
    np.testing.assert_array_equal(reduction("MUL_NO_ZEROS", x, (1, 2)), [[1.0, -12.0]])
    np.testing.assert_array_equal(reduction("MUL_NO_ZEROS", np.zeros((3,)), (1,)), [1.0])
    with pytest.raises(ValueError):
        reduction("ADD", x, (3, 1))


@pytest.mark.parametrize("op", ["MIN", "MAX", "AMAX"])
def test_indices_name_the_winner(op, rng):
    x = rng.uniform(-2, 2, size=(3, 4, 5))
    out = (3, 1, 1)
    idx = reduction_indices(op, x, out)
    val = reduction(op, x, out)
    assert idx.shape == out and idx.dtype == np.int64
    for n in range(3):
        r, c = divmod(int(idx[n, 0, 0]), 5)   # reduced axes (4, 5), row-major
        v = abs(x[n, r, c]) if op == "AMAX" else x[n, r, c]
        assert v == val[n, 0, 0]
    # first occurrence on ties
    t = np.array([[1.0, 3.0, 3.0]])
    assert reduction_indices("MAX", t, (1, 1))[0, 0] == 1
    with pytest.raises(ValueError):
        reduction_indices("ADD", t, (1, 1))
