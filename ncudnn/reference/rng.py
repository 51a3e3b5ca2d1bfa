"""Reference Philox4x32-10 and the RNG operation's bit-exact convention (ncudnn's definition).

Philox4x32-10 (Salmon et al., SC'11; the generator cuRAND and PyTorch use): a 128-bit counter
(c0..c3) and a 64-bit key (k0, k1); 10 rounds of

    (c0, c1, c2, c3) <- (hi(M1*c2) ^ c1 ^ k0,  lo(M1*c2),  hi(M0*c0) ^ c3 ^ k1,  lo(M0*c0))
    with M0 = 0xD2511F53, M1 = 0xCD9E8D57, and the key bumped by (0x9E3779B9, 0xBB67AE85)
    between rounds. ``philox4x32_10`` checks against the published Random123 known answers.

Word stream (what cuRAND's curand_init(seed, subsequence=0, offset) + curand() calls yield):
word t is lane t % 4 of philox4x32_10(counter = t // 4 as a 128-bit little-endian integer,
key = (seed & 0xffffffff, seed >> 32)).

The RNG op (CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR; cuDNN does not publish its element mapping,
so this is ncudnn's contract that the rng kernel implements bit-exactly): element i of Y (row-major
over Y's logical dims) uses stream word offset + i:

    u_i = float32 rounding (single, as an FMA) of (w + 0.5) * 2^-32, in (0, 1]  (curand_uniform)
    UNIFORM:   y = uniform_min + (uniform_max - uniform_min) * u_i
    BERNOULLI: y = 1 if u_i <= probability else 0   (probability of a 1)
    NORMAL:    Box-Muller on the word pair p = offset + 2*(i // 2), p + 1 (curand_normal's):
               u = float32((w_p + 0.5) * 2^-32), v = (w_{p+1} + 0.5) * 2^-32 * 2*pi,
               s = sqrt(-2 ln u); element 2m -> s*sin(v), 2m+1 -> s*cos(v); y = mean + std * that.
UNIFORM and BERNOULLI are exact given the float32 u; NORMAL is exact in float64 here and within
float32 libm error (a few ulp) in a kernel.
"""
import numpy as np

from ..types import cudnnRngDistribution_t as RD
from ._util import enum_member

__all__ = ["philox4x32_10", "philox_words", "philox_uniform", "rng_generate"]

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Philox4x32-10 of counter (..., 4) uint32-valued and key (..., 2); returns (..., 4) uint32."""
    c = np.asarray(counter, dtype=np.uint64) & _MASK
    k = np.asarray(key, dtype=np.uint64) & _MASK
    c0, c1, c2, c3 = (c[..., i] for i in range(4))
    k0, k1 = k[..., 0], k[..., 1]
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        p0, p1 = _M0 * c0, _M1 * c2  # < 2^64: exact in uint64
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _MASK,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _MASK)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def philox_words(seed, offset, n):
    """Words offset .. offset+n-1 of the seed's stream (see module docstring), uint32 (n,)."""
    t = np.arange(int(offset), int(offset) + int(n), dtype=np.uint64)
    blk = t // np.uint64(4)
    ctr = np.stack([blk & _MASK, blk >> np.uint64(32), np.zeros_like(blk), np.zeros_like(blk)], -1)
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    out = philox4x32_10(ctr, np.broadcast_to(np.array([seed & 0xFFFFFFFF, seed >> 32],
                                                      dtype=np.uint64), ctr.shape[:-1] + (2,)))
    return out[np.arange(int(n)), (t % np.uint64(4)).astype(np.int64)]


def philox_uniform(words):
    """curand_uniform of uint32 words: float32((w + 0.5) * 2^-32) (one rounding), as float64."""
    w = np.asarray(words, dtype=np.float64)
    return ((w + 0.5) * 2.0 ** -32).astype(np.float32).astype(np.float64)


def rng_generate(shape, distribution, seed, offset=0, *, uniform_min=0.0, uniform_max=1.0,
        bernoulli_probability=0.5, normal_mean=0.0, normal_std=1.0):
    """The RNG op's output (float64, ``shape``) under the convention in the module docstring."""
    dist = enum_member(RD, distribution, "CUDNN_RNG_DISTRIBUTION_")
    n = int(np.prod(shape))
    if dist == RD.CUDNN_RNG_DISTRIBUTION_NORMAL:
        m = (n + 1) // 2
        w = philox_words(seed, offset, 2 * m).reshape(m, 2)
        u = philox_uniform(w[:, 0])
        v = (w[:, 1].astype(np.float64) + 0.5) * 2.0 ** -32 * 2.0 * np.pi
        s = np.sqrt(-2.0 * np.log(u))
        z = np.stack([s * np.sin(v), s * np.cos(v)], axis=-1).reshape(-1)[:n]
        return (normal_mean + normal_std * z).reshape(shape)
    u = philox_uniform(philox_words(seed, offset, n))
    if dist == RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI:
        return (u <= bernoulli_probability).astype(np.float64).reshape(shape)
    if dist == RD.CUDNN_RNG_DISTRIBUTION_UNIFORM:
        return (uniform_min + (uniform_max - uniform_min) * u).reshape(shape)
    raise ValueError(f"unsupported distribution {dist!r}")
