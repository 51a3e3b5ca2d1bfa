"""Counter-based random numbers: Philox4x32-10, deterministic from (seed, offset), any launch shape.

The stream and the element mapping are those of :mod:`ncudnn.reference.rng` (bit-exact):

* key = (seed & 0xffffffff, seed >> 32); stream word t is lane t % 4 of Philox4x32-10 of the
  128-bit counter t // 4 (cuRAND's curand_init(seed, 0, offset) + curand() sequence);
* element i of the output uses word offset + i; ``u = float32((w + 0.5) * 2**-32)`` (one
  rounding, computed exactly in float64) in (0, 1];
* UNIFORM ``low + (high - low) * u``; BERNOULLI ``1 if u <= p else 0``;
* NORMAL: Box-Muller on the word pair (offset + 2m, offset + 2m + 1): ``s = sqrt(-2 ln u)``,
  ``v = (w' + 0.5) * 2**-32 * 2 pi``; element 2m is ``mean + std * s * sin(v)``, 2m+1 uses cos.

One thread per Philox block (4 words); an odd offset makes a NORMAL pair straddle two blocks, so
that case also computes the next block's first word. Output stored in any dtype.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

from ..runtime.dtypes import storer
from ..primitives.warp import SIM, launch, sm_count
from ...types import cudnnRngDistribution_t as RD

__all__ = ["philox4x32_10", "rng_fill", "RAW_BITS"]

#: Pseudo-distribution for tests: the raw 32-bit words (output must be uint32).
RAW_BITS = -1

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ZERO = np.uint64(0)


@cuda.jit(device=True, inline=True)
def _round(c0, c1, c2, c3, k0, k1):
    p0 = _M0 * c0
    p1 = _M1 * c2
    return ((p1 >> _S32) ^ c1 ^ k0, p1 & _MASK, (p0 >> _S32) ^ c3 ^ k1, p0 & _MASK)


@cuda.jit(device=True, inline=True)
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0..c3) under key (k0, k1); every value a uint64 < 2**32."""
    for _ in range(9):
        c0, c1, c2, c3 = _round(c0, c1, c2, c3, k0, k1)
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return _round(c0, c1, c2, c3, k0, k1)


@cuda.jit(device=True, inline=True)
def _word(j, w0, w1, w2, w3):
    return w0 if j == 0 else (w1 if j == 1 else (w2 if j == 2 else w3))


@cuda.jit(device=True, inline=True)
def _unit(w):
    """float32((w + 0.5) * 2**-32): exact in float64, then one rounding."""
    return numba.float32((numba.float64(w) + 0.5) * 2.3283064365386963e-10)


@functools.lru_cache(maxsize=None)
def _kernel(dist, out_dtype):
    raw = dist == RAW_BITS
    normal = dist == int(RD.CUDNN_RNG_DISTRIBUTION_NORMAL)
    uniform = dist == int(RD.CUDNN_RNG_DISTRIBUTION_UNIFORM)
    st = storer(out_dtype)
    two_pi_2p32 = 2.0 * math.pi * 2.0 ** -32

    @cuda.jit
    def kernel(out, n, k0, k1, off0, off1, a, b):
        off = numba.int64(off0 | (off1 << _S32))
        first = off // 4
        last = (off + n - 1) // 4
        bi = first + cuda.grid(1)
        step = cuda.gridsize(1)
        odd = off % 2
        while bi <= last:
            bb = numba.uint64(bi)
            w0, w1, w2, w3 = philox4x32_10(bb & _MASK, bb >> _S32, _ZERO, _ZERO, k0, k1)
            if normal:
                w4 = w0
                if odd == 1:
                    bn = numba.uint64(bi + 1)
                    w4, _x, _y, _z = philox4x32_10(bn & _MASK, bn >> _S32, _ZERO, _ZERO, k0, k1)
                for j in range(2):
                    q = 2 * j + odd                      # lane of the pair's first word
                    i = 4 * bi + q - off
                    if i >= 0 and i < n:
                        wu = _word(q, w0, w1, w2, w3)
                        wv = w4 if q == 3 else _word(q + 1, w0, w1, w2, w3)
                        s = math.sqrt(numba.float32(-2.0) * math.log(_unit(wu)))
                        v = numba.float32((numba.float64(wv) + 0.5) * two_pi_2p32)
                        st(out, i, numba.float32(a) + numba.float32(b) * s * math.sin(v))
                        if i + 1 < n:
                            st(out, i + 1, numba.float32(a) + numba.float32(b) * s * math.cos(v))
            else:
                for j in range(4):
                    i = 4 * bi + j - off
                    if i >= 0 and i < n:
                        w = _word(j, w0, w1, w2, w3)
                        if raw:
                            out[i] = numba.uint32(w)
                        elif uniform:
                            st(out, i, a + (b - a) * numba.float64(_unit(w)))
                        else:   # BERNOULLI with probability a
                            st(out, i, numba.float32(1.0) if numba.float64(_unit(w)) <= a
                               else numba.float32(0.0))
            bi += step
    return kernel


def rng_fill(out, n, distribution, seed, offset=0, *, mean=0.0, std=1.0, low=0.0, high=1.0,
             prob=0.5, out_dtype="float32", block=128, stream=0):
    """Fill the first ``n`` elements of device array ``out`` (storage dtype, flat) from the stream.

    ``distribution``: cudnnRngDistribution_t (NORMAL: mean / std; UNIFORM: low / high;
    BERNOULLI: prob) or :data:`RAW_BITS` (the words themselves; ``out`` uint32). ``seed``: a
    64-bit int; ``offset``: the first word's index (0 <= offset < 2**62). The kernel takes
    (out, n, seed_lo, seed_hi, offset_lo, offset_hi, a, b), the 32-bit halves as uint64.
    """
    dist = int(distribution)
    a, b = {int(RD.CUDNN_RNG_DISTRIBUTION_NORMAL): (mean, std),
            int(RD.CUDNN_RNG_DISTRIBUTION_UNIFORM): (low, high),
            int(RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI): (prob, 0.0), RAW_BITS: (0.0, 0.0)}[dist]
    if n <= 0:
        return
    kern = _kernel(dist, "uint32" if dist == RAW_BITS else out_dtype)
    s, o = int(seed) & (2 ** 64 - 1), int(offset)
    n_blocks = (o + n - 1) // 4 - o // 4 + 1
    blocks = max(1, min(math.ceil(n_blocks / block), 8 if SIM else sm_count() * 16))
    u = np.uint64
    launch(kern, blocks, block, stream, out.reshape(out.size), n, u(s & 0xFFFFFFFF), u(s >> 32),
           u(o & 0xFFFFFFFF), u(o >> 32), float(a), float(b))
