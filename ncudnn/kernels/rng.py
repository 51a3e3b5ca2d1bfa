"""Counter-based random numbers: Philox4x32-10, deterministic from (seed, offset), any thread order.

Stream definition (the contract tests and users can rely on):

* key = (seed & 0xffffffff, seed >> 32); element ``e`` of a call belongs to Philox block
  ``b = e // 4`` with counter ``(b & 0xffffffff, b >> 32, offset & 0xffffffff, offset >> 32)``,
  and takes word ``e % 4`` of that block's output. So two calls with different offsets never
  share a block, and a call's output does not depend on the launch shape.
* uniform: ``u = ((word >> 8) + 0.5) * 2**-24`` in (0, 1); UNIFORM gives ``low + (high - low) * u``.
* NORMAL: Box-Muller on the block's word pairs (0, 1) and (2, 3):
  ``r = sqrt(-2 ln u0)``, ``z0 = r cos(2 pi u1)``, ``z1 = r sin(2 pi u1)``; y = mean + std * z.
* BERNOULLI: ``1 if u < p else 0``.

One thread per Philox block (4 outputs), math in float32, output stored in any dtype.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

from .dtypes import storer
from .primitives import SIM, launch, sm_count
from ..types import cudnnRngDistribution_t as RD

__all__ = ["philox4x32_10", "rng_fill", "RAW_BITS"]

#: Pseudo-distribution for tests: the raw 32-bit words (output must be uint32).
RAW_BITS = -1

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


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


@functools.lru_cache(maxsize=None)
def _kernel(dist, out_dtype):
    if dist == RAW_BITS:
        return _raw_kernel()
    st = storer(out_dtype)
    scale = np.float32(2.0 ** -24)
    half = np.float32(0.5)
    two_pi = np.float32(2.0 * math.pi)
    m2 = np.float32(-2.0)
    one, zero = np.float32(1.0), np.float32(0.0)
    normal = dist == int(RD.CUDNN_RNG_DISTRIBUTION_NORMAL)
    uniform = dist == int(RD.CUDNN_RNG_DISTRIBUTION_UNIFORM)

    @cuda.jit
    def kernel(out, n, k0, k1, off0, off1, a, b):
        blk = cuda.grid(1)
        step = cuda.gridsize(1)
        af = numba.float32(a)
        bf = numba.float32(b)
        while blk * 4 < n:
            bb = numba.uint64(blk)
            w0, w1, w2, w3 = philox4x32_10(bb & _MASK, bb >> _S32, off0, off1, k0, k1)
            u0 = (numba.float32(w0 >> numba.uint64(8)) + half) * scale
            u1 = (numba.float32(w1 >> numba.uint64(8)) + half) * scale
            u2 = (numba.float32(w2 >> numba.uint64(8)) + half) * scale
            u3 = (numba.float32(w3 >> numba.uint64(8)) + half) * scale
            if normal:
                r0 = math.sqrt(m2 * math.log(u0))
                r1 = math.sqrt(m2 * math.log(u2))
                v0 = af + bf * r0 * math.cos(two_pi * u1)
                v1 = af + bf * r0 * math.sin(two_pi * u1)
                v2 = af + bf * r1 * math.cos(two_pi * u3)
                v3 = af + bf * r1 * math.sin(two_pi * u3)
            elif uniform:
                v0 = af + (bf - af) * u0
                v1 = af + (bf - af) * u1
                v2 = af + (bf - af) * u2
                v3 = af + (bf - af) * u3
            else:   # BERNOULLI with probability a
                v0 = one if u0 < af else zero
                v1 = one if u1 < af else zero
                v2 = one if u2 < af else zero
                v3 = one if u3 < af else zero
            e = blk * 4
            if e < n:
                st(out, e, v0)
            if e + 1 < n:
                st(out, e + 1, v1)
            if e + 2 < n:
                st(out, e + 2, v2)
            if e + 3 < n:
                st(out, e + 3, v3)
            blk += step
    return kernel


@functools.lru_cache(maxsize=None)
def _raw_kernel():
    @cuda.jit
    def kernel(out, n, k0, k1, off0, off1, a, b):
        blk = cuda.grid(1)
        step = cuda.gridsize(1)
        while blk * 4 < n:
            bb = numba.uint64(blk)
            w0, w1, w2, w3 = philox4x32_10(bb & _MASK, bb >> _S32, off0, off1, k0, k1)
            e = blk * 4
            if e < n:
                out[e] = numba.uint32(w0)
            if e + 1 < n:
                out[e + 1] = numba.uint32(w1)
            if e + 2 < n:
                out[e + 2] = numba.uint32(w2)
            if e + 3 < n:
                out[e + 3] = numba.uint32(w3)
            blk += step
    return kernel


def rng_fill(out, n, distribution, seed, offset=0, *, mean=0.0, std=1.0, low=0.0, high=1.0,
             prob=0.5, out_dtype="float32", block=128, stream=0):
    """Fill the first ``n`` elements of device array ``out`` (storage dtype, flat) from the stream.

    ``distribution``: cudnnRngDistribution_t (NORMAL: mean / std; UNIFORM: low / high;
    BERNOULLI: prob) or :data:`RAW_BITS` (uint32 output). ``seed`` and ``offset``: 64-bit ints.
    """
    dist = int(distribution)
    a, b = {int(RD.CUDNN_RNG_DISTRIBUTION_NORMAL): (mean, std),
            int(RD.CUDNN_RNG_DISTRIBUTION_UNIFORM): (low, high),
            int(RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI): (prob, 0.0), RAW_BITS: (0.0, 0.0)}[dist]
    kern = _kernel(dist, out_dtype)
    blocks = max(1, min(math.ceil(n / 4 / block), 8 if SIM else sm_count() * 16))
    s, o = int(seed) & (2 ** 64 - 1), int(offset) & (2 ** 64 - 1)
    u = np.uint64
    launch(kern, blocks, block, stream, out.reshape(out.size), n, u(s & 0xFFFFFFFF), u(s >> 32),
                                u(o & 0xFFFFFFFF), u(o >> 32), float(a), float(b))


def _register_compile_cases():
    try:
        from .compile_check import register_compile_case
    except ImportError:
        return
    from .dtypes import array_sig
    for dist, dt in ((RD.CUDNN_RNG_DISTRIBUTION_NORMAL, "float32"),
                     (RD.CUDNN_RNG_DISTRIBUTION_UNIFORM, "bfloat16"),
                     (RD.CUDNN_RNG_DISTRIBUTION_BERNOULLI, "float16")):
        register_compile_case(f"rng_philox_{dist.name[23:].lower()}_{dt}", _kernel(int(dist), dt),
                              f"void({array_sig(dt)}, int64, uint64, uint64, uint64, uint64, "
                              "float64, float64)", max_registers=64)


_register_compile_cases()
