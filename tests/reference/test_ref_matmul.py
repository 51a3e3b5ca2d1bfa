"""reference.matmul against explicit triple loops and a hand case."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn.reference import matmul


def test_hand_case():
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[5.0, 6.0], [7.0, 8.0]]
    np.testing.assert_array_equal(matmul(a, b), [[19.0, 22.0], [43.0, 50.0]])


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                   ((2, 1, 3, 4), (1, 3, 4, 2)), ((1, 3, 4), (5, 4, 2))])
def test_matches_loops_with_batch_broadcast(sa, sb, rng):
    a = rng.uniform(-1, 1, size=sa)
    b = rng.uniform(-1, 1, size=sb)
    got = matmul(a, b)
    batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    M, K, N = sa[-2], sa[-1], sb[-1]
    assert got.shape == batch + (M, N)
    ab = np.broadcast_to(a, batch + (M, K))
    bb = np.broadcast_to(b, batch + (K, N))
    for idx in np.ndindex(*batch):
        for i in range(M):
            for j in range(N):
                want = sum(float(ab[idx][i, k]) * float(bb[idx][k, j]) for k in range(K))
                assert got[idx][i, j] == pytest.approx(want, rel=1e-13, abs=1e-14)


def test_bf16_inputs_and_errors(rng):
    a = rng.uniform(-1, 1, size=(2, 3)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, size=(3, 2)).astype(ml_dtypes.bfloat16)
    got = matmul(a, b)
    assert got.dtype == np.float64
    af, bf = a.astype(np.float32).astype(float), b.astype(np.float32).astype(float)
    assert got[1, 0] == pytest.approx(sum(af[1, k] * bf[k, 0] for k in range(3)), rel=1e-14)
    with pytest.raises(ValueError):
        matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError):
        matmul(np.ones(3), np.ones((3, 2)))


def test_ragged_overrides_and_padding(rng):
    B, H, M, K, N = 2, 2, 3, 4, 5
    a = rng.uniform(-1, 1, size=(B, H, M, K))
    b = rng.uniform(-1, 1, size=(B, 1, K, N))
    mo = np.array([2, 3]).reshape(B, 1, 1, 1)
    no = np.array([5, 1]).reshape(B, 1, 1, 1)
    ko = np.array([3, 4]).reshape(B, 1, 1, 1)
    c = matmul(a, b, m_override=mo, n_override=no, k_override=ko, padding_value=-7.0)
    assert c.shape == (B, H, M, N)
    for bb, h, i, j in np.ndindex(B, H, M, N):
        if i < mo[bb, 0, 0, 0] and j < no[bb, 0, 0, 0]:
            want = sum(a[bb, h, i, k] * b[bb, 0, k, j] for k in range(ko[bb, 0, 0, 0]))
            assert c[bb, h, i, j] == pytest.approx(want, rel=1e-13, abs=1e-14)
        else:
            assert c[bb, h, i, j] == -7.0
