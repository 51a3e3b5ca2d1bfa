"""Loading any tensor dtype into float32 (or float64) registers and storing back, without half math.

Storage as kernels see it (numba has no bf16 / fp8 array types): bfloat16 arrives as ``uint16``
bits, float8_e4m3fn / float8_e5m2 as ``uint8`` bits, float16 as numba ``float16``; everything else
as itself. Conversions:

* float16: numba's float16 -> float32 convert on load, float32 -> float16 (round to nearest even)
  on store; no float16 arithmetic.
* bfloat16: the 16 bits shifted into the top of a float32 on load; on store round to nearest even
  on the float32 bits (NaN stays a quiet NaN with its sign).
* fp8 e4m3fn (bias 7, max 448, no inf, NaN = S.1111.111) and e5m2 (bias 15, max 57344, inf, NaN):
  decoded bit by bit on load; on store rounded to nearest even, subnormals included. Overflow
  gives NaN (e4m3fn) / inf (e5m2) as ml_dtypes does, or the largest finite value with
  ``saturate=True`` (NVIDIA's satfinite). NaN stays NaN.
* integers / bool: plain conversion (float -> int truncates toward zero, as C does).

:func:`loader` and :func:`storer` return ``cuda.jit`` device functions ``load(arr, i)`` and
``store(arr, i, value)`` for a dtype name, cached; they run on a GPU and in the simulator.
"""
import functools

import numba
import numpy as np
from numba import cuda
from numba.types import float16 as _float16

from ..primitives.warp import f32_as_u32, u32_as_f32

__all__ = ["dtype_name", "storage_dtype", "compute_type", "loader", "storer", "FLOAT_TYPES",
           "to_storage", "from_storage", "array_sig", "placeholder", "loader2", "storer2", "PACKABLE"]

#: Dtype names this module knows, mapped to what a kernel's array holds.
_STORAGE = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
    "int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32, "int64": np.int64,
    "bool": np.bool_,
}
FLOAT_TYPES = frozenset({"float32", "float64", "float16", "bfloat16", "float8_e4m3fn",
                         "float8_e5m2"})
_ALIASES = {"bool_": "bool", "half": "float16", "float": "float32", "double": "float64",
            "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
            "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def dtype_name(dtype):
    """Canonical name of a NumPy / ml_dtypes dtype, a dtype object or a name string."""
    if isinstance(dtype, str):
        name = dtype
    else:
        name = np.dtype(dtype).name
    name = _ALIASES.get(name, name)
    if name not in _STORAGE:
        raise ValueError(f"unsupported kernel dtype {dtype!r}")
    return name


def storage_dtype(dtype):
    """The NumPy dtype of the array a kernel receives for tensors of ``dtype``."""
    return np.dtype(_STORAGE[dtype_name(dtype)])


def compute_type(dtypes):
    """"float64" when every I/O dtype is float64, else "float32"."""
    names = [dtype_name(d) for d in dtypes]
    return "float64" if names and all(n == "float64" for n in names) else "float32"


def array_sig(dtype):
    """numba signature text of a 1-D C-contiguous storage array of ``dtype`` ("uint16[::1]")."""
    st = storage_dtype(dtype)
    return ("boolean" if st == np.bool_ else st.name) + "[::1]"


_PLACEHOLDERS = {}


def placeholder(dtype):
    """A cached one-element device array of ``dtype`` storage: the argument for an unused slot."""
    name = dtype_name(dtype)
    arr = _PLACEHOLDERS.get(name)
    if arr is None:
        arr = _PLACEHOLDERS[name] = cuda.device_array(1, dtype=storage_dtype(name))
    return arr


def to_storage(host_array):
    """A host array (any dtype, ml_dtypes included) as its kernel storage (bits for bf16 / fp8)."""
    a = np.ascontiguousarray(host_array)
    return a.view(storage_dtype(a.dtype))


def from_storage(bits, dtype):
    """The inverse of :func:`to_storage`: reinterpret storage bits as ``dtype`` (host arrays)."""
    name = dtype_name(dtype)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes
        return np.asarray(bits).view(getattr(ml_dtypes, name))
    return np.asarray(bits)


# --------------------------------------------------------------------------------------------
# bf16

@cuda.jit(device=True, inline=True)
def _bf16_to_f32(bits):
    return u32_as_f32(numba.uint32(bits) << 16)


@cuda.jit(device=True, inline=True)
def _f32_to_bf16(v):
    u = f32_as_u32(numba.float32(v))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return numba.uint16((u >> 16) | 0x40)
    return numba.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


# --------------------------------------------------------------------------------------------
# fp8: decode / encode for (mantissa bits M, exponent bias B)

def _fp8_codec(m_bits, bias, has_inf, saturate):
    max_code = 0x7E if not has_inf else 0x7B          # largest finite magnitude code
    nan_code = 0x7F if not has_inf else 0x7E
    inf_code = 0x7C
    exp_all_ones = 0x1F if has_inf else 0xF
    e_shift = m_bits
    m_mask = (1 << m_bits) - 1
    f32_shift = 23 - m_bits
    exp_offset = 127 - bias
    sub_scale = np.float32(2.0 ** (1 - bias - m_bits))        # value of one subnormal step
    inv_sub_scale = np.float32(2.0 ** (bias - 1 + m_bits))
    min_normal_bits = (exp_offset + 1) << 23
    overflow_code = max_code if saturate else (inf_code if has_inf else nan_code)

    @cuda.jit(device=True, inline=True)
    def decode(bits):
        b = numba.uint32(bits)
        s = b >> 7
        e = (b >> e_shift) & exp_all_ones
        m = b & m_mask
        if e == exp_all_ones and (has_inf or m == m_mask):
            if has_inf and m == 0:
                return u32_as_f32((s << 31) | 0x7F800000)
            return u32_as_f32(0x7FC00000)
        if e == 0:
            v = numba.float32(m) * sub_scale
            return -v if s != 0 else v
        return u32_as_f32((s << 31) | ((e + exp_offset) << 23) | (m << f32_shift))

    @cuda.jit(device=True, inline=True)
    def encode(v):
        u = f32_as_u32(numba.float32(v))
        sign = (u >> 24) & 0x80
        a = u & 0x7FFFFFFF
        if a > 0x7F800000:
            return numba.uint8(sign | nan_code)
        if a >= min_normal_bits:
            r = (a + (1 << (f32_shift - 1)) - 1 + ((a >> f32_shift) & 1)) >> f32_shift
            code = r - (exp_offset << m_bits)
            if code > max_code:
                code = overflow_code
            return numba.uint8(sign | code)
        q = u32_as_f32(a) * inv_sub_scale          # exact: a power-of-two scaling
        fl = numba.int32(q)
        frac = q - numba.float32(fl)
        if frac > numba.float32(0.5) or (frac == numba.float32(0.5) and (fl & 1) == 1):
            fl += 1
        return numba.uint8(sign | fl)

    return decode, encode


# --------------------------------------------------------------------------------------------
# the factories

def _convert(ctype):
    return numba.float64 if ctype == "float64" else numba.float32


@functools.lru_cache(maxsize=None)
def loader(dtype, ctype="float32"):
    """Device function ``load(arr, i) -> ctype`` for arrays holding ``dtype`` (storage form)."""
    name = dtype_name(dtype)
    conv = _convert(ctype)
    if name == "bfloat16":
        @cuda.jit(device=True, inline=True)
        def load(arr, i):
            return conv(_bf16_to_f32(arr[i]))
    elif name in ("float8_e4m3fn", "float8_e5m2"):
        decode, _ = _fp8_codec(*_FP8[name], False)

        @cuda.jit(device=True, inline=True)
        def load(arr, i):
            return conv(decode(arr[i]))
    else:
        @cuda.jit(device=True, inline=True)
        def load(arr, i):
            return conv(arr[i])
    return load


_FP8 = {"float8_e4m3fn": (3, 7, False), "float8_e5m2": (2, 15, True)}


@functools.lru_cache(maxsize=None)
def storer(dtype, saturate=False):
    """Device function ``store(arr, i, value)`` writing a float/int/bool register as ``dtype``."""
    name = dtype_name(dtype)
    if name == "bfloat16":
        @cuda.jit(device=True, inline=True)
        def store(arr, i, v):
            arr[i] = _f32_to_bf16(v)
    elif name in ("float8_e4m3fn", "float8_e5m2"):
        _, encode = _fp8_codec(*_FP8[name], saturate)

        @cuda.jit(device=True, inline=True)
        def store(arr, i, v):
            arr[i] = encode(v)
    elif name == "float16":
        @cuda.jit(device=True, inline=True)
        def store(arr, i, v):
            arr[i] = _float16(numba.float32(v))
    elif name == "bool":
        @cuda.jit(device=True, inline=True)
        def store(arr, i, v):
            arr[i] = v != 0
    else:
        conv = getattr(numba, name)

        @cuda.jit(device=True, inline=True)
        def store(arr, i, v):
            arr[i] = conv(v)
    return store


# --------------------------------------------------------------------------------------------
# packed pairs (two bf16 in one 32-bit word): the dense pointwise path's wide loads / stores

PACKABLE = frozenset({"bfloat16"})


@functools.lru_cache(maxsize=None)
def loader2(dtype, ctype="float32"):
    """``load2(words, p) -> (lo, hi)``: elements 2p and 2p+1 from a uint32 view of the storage."""
    if dtype_name(dtype) != "bfloat16":
        raise ValueError(f"no packed loader for {dtype!r}")
    conv = _convert(ctype)

    @cuda.jit(device=True, inline=True)
    def load2(words, p):
        w = numba.uint32(words[p])
        return conv(u32_as_f32((w & 0xFFFF) << 16)), conv(u32_as_f32(w & 0xFFFF0000))
    return load2


@functools.lru_cache(maxsize=None)
def storer2(dtype):
    """``store2(words, p, lo, hi)``: elements 2p and 2p+1 (round to nearest even) as one word."""
    if dtype_name(dtype) != "bfloat16":
        raise ValueError(f"no packed storer for {dtype!r}")

    @cuda.jit(device=True, inline=True)
    def store2(words, p, lo, hi):
        words[p] = numba.uint32(_f32_to_bf16(lo)) | (numba.uint32(_f32_to_bf16(hi)) << 16)
    return store2
