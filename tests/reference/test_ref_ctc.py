"""reference.ctc against brute-force enumeration of alignments and finite differences."""
import itertools
import math

import numpy as np
import pytest

from ncudnn.reference import ctc_loss


def collapse(path):
    out, prev = [], None
    for a in path:
        if a != prev and a != 0:
            out.append(a)
        prev = a
    return out


def brute_cost(probs, lab):
    T, A = probs.shape
    tot = sum(math.prod(probs[t, a] for t, a in enumerate(path))
              for path in itertools.product(range(A), repeat=T) if collapse(path) == list(lab))
    return -math.log(tot) if tot > 0 else math.inf


def softmax(u):
    e = np.exp(u - u.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("labels", [[[1, 2], [2, 2], [1]], [[1, 1, 2], [], [2]]])
def test_costs_match_brute_force(labels, rng):
    T, N, A = 5, 3, 3
    probs = softmax(rng.normal(size=(T, N, A)))
    lens = [5, 4, 5]
    costs, grads = ctc_loss(probs, labels, lens)
    for n in range(N):
        assert costs[n] == pytest.approx(brute_cost(probs[:lens[n], n], labels[n]), rel=1e-12)
    assert np.all(grads[4, 1] == 0)  # beyond entry 1's input length


def test_gradient_wrt_activations(rng):
    T, N, A = 4, 2, 4
    u = rng.normal(size=(T, N, A))
    flat, ll = [1, 3, 3, 2], [2, 2]     # entry 0: [1, 3], entry 1: [3, 2]
    costs, grads = ctc_loss(softmax(u), flat, [4, 3], label_lengths=ll)
    h = 1e-6
    for i in np.ndindex(*u.shape):
        up, um = u.copy(), u.copy()
        up[i] += h
        um[i] -= h
        fd = (ctc_loss(softmax(up), flat, [4, 3], ll)[0].sum()
              - ctc_loss(softmax(um), flat, [4, 3], ll)[0].sum()) / (2 * h)
        assert grads[i] == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_infeasible_and_hand_case():
    probs = np.full((2, 1, 2), 0.5)
    costs, grads = ctc_loss(probs, [[1, 1]], [2])   # needs 3 steps (blank between repeats)
    assert costs[0] == math.inf and np.all(grads == 0)
    # T = 1, label [1]: only path is (1)
    costs, _ = ctc_loss(np.array([[[0.25, 0.75]]]), [[1]], [1])
    assert costs[0] == pytest.approx(-math.log(0.75))
    with pytest.raises(ValueError):
        ctc_loss(probs, [[0]], [2])
