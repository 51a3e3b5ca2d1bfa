"""reference.quantize: MX / NVFP4 block scaling against hand cases and per-block loops."""
import math

import ml_dtypes
import numpy as np
import pytest

from ncudnn.reference import block_scale_dequantize, block_scale_quantize

# representable magnitudes of e2m1: the whole grid, for an exhaustive nearest check
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_mxfp8_hand_case():
    x = np.array([[1.0, -3.0, 0.0, 500.0], [0.0, 0.0, 0.0, 0.0]])
    q, s = block_scale_quantize(x, 4, "float8_e4m3fn", axis=-1)
    # amax 500 -> floor(log2 500) = 8 -> scale 2^(8-8) = 1; 500 saturates to 448 (e4m3 max)
    assert s[0, 0] == 1.0 and s[1, 0] == 2.0 ** -127
    np.testing.assert_array_equal(q[0], [1.0, -3.0, 0.0, 448.0])
    np.testing.assert_array_equal(q[1], 0.0)


def test_nvfp4_matches_nearest_grid_point(rng):
    x = rng.uniform(-3, 3, size=(3, 32))
    q, s = block_scale_quantize(x, 16, "float4_e2m1fn", axis=1, scale_format="e4m3")
    assert s.shape == (3, 2)
    for r, b in np.ndindex(3, 2):
        blk = x[r, 16 * b:16 * b + 16]
        sc = float(np.float64(np.abs(blk).max() / 6.0).astype(ml_dtypes.float8_e4m3fn))
        assert s[r, b] == sc
        for v, got in zip(blk, q[r, 16 * b:16 * b + 16]):
            t = abs(v) / sc
            dist = [abs(t - g) for g in E2M1]
            best = min(dist)
            cands = [g for g, d in zip(E2M1, dist) if d == best]
            assert abs(got) in cands and (got == 0 or math.copysign(1, got) == math.copysign(1, v))


@pytest.mark.parametrize("fmt,emax", [("float8_e4m3fn", 8), ("float8_e5m2", 15),
                                      ("float4_e2m1fn", 2), ("float6_e3m2fn", 4)])
def test_mx_scale_rule_and_roundtrip(fmt, emax, rng):
    x = rng.normal(size=(4, 64)) * np.exp2(rng.integers(-20, 20, size=(4, 1)))
    q, s = block_scale_quantize(x, 32, fmt, axis=1)
    assert s.shape == (4, 2)
    vmax = float(ml_dtypes.finfo(getattr(ml_dtypes, fmt)).max)
    for r, b in np.ndindex(4, 2):
        blk = x[r, 32 * b:32 * b + 32]
        assert s[r, b] == 2.0 ** (math.floor(math.log2(np.abs(blk).max())) - emax)
        qb = q[r, 32 * b:32 * b + 32]
        # every q is representable in the element format and |q| <= max
        np.testing.assert_array_equal(qb.astype(getattr(ml_dtypes, fmt)).astype(float), qb)
        assert np.abs(qb).max() <= vmax
    y = block_scale_dequantize(q, s, 32, axis=1)
    eps = {"float8_e4m3fn": 2 ** -3, "float8_e5m2": 2 ** -2, "float4_e2m1fn": 0.5,
           "float6_e3m2fn": 0.25}[fmt]
    amax = np.repeat(np.abs(x).reshape(4, 2, 32).max(-1), 32, axis=1)
    # error per element is within half a step at the block's top binade, relative to amax
    assert np.all(np.abs(y - x) <= eps * amax + 1e-300)


def test_axis_zero_and_errors(rng):
    x = rng.uniform(-1, 1, size=(8, 3))
    q, s = block_scale_quantize(x, 4, axis=0)
    assert s.shape == (2, 3)
    np.testing.assert_array_equal(block_scale_dequantize(q, s, 4, axis=0)[:4, 1], q[:4, 1] * s[0, 1])
    with pytest.raises(ValueError):
        block_scale_quantize(x, 5, axis=0)
