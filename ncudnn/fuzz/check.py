"""The tolerance a plan is held to, and the comparison of one output with the oracle.

The tolerance is :data:`ncudnn.testing.TOL` of the least precise of: the graph's non-virtual tensor
types and what the plan's numerical notes claim. On FP32 (or FP64) data: TENSOR_CORE is TF32, whether
or not DOWN_CONVERT_INPUTS comes with it (the tensor-core engines note both when they run FP32
operands as TF32: the down-conversion is to TF32, not to FP16); DOWN_CONVERT_INPUTS without
TENSOR_CORE, or REDUCED_PRECISION_REDUCTION, is FP16 arithmetic. On 16-bit or FP8 data the notes add
nothing (tensor cores multiply those inputs exactly and accumulate in FP32) except
REDUCED_PRECISION_REDUCTION (FP16 accumulation, where the data was BF16 or FP8 the coarser of the
two). WINOGRAD: at least the FP32 tolerance times four (the transforms' extra rounding). Integer and
boolean outputs must match exactly.
"""
import numpy as np

from ..testing import TOL, rel_err, to_f64
from ..types import cudnnBackendNumericalNote_t as NN, cudnnDataType_t as CDT

#: precision labels from most to least precise (keys of TOL)
ORDER = ("float64", "float32", "tf32", "float16", "bfloat16", "fp8")

_LABEL = {CDT.CUDNN_DATA_DOUBLE: "float64", CDT.CUDNN_DATA_FLOAT: "float32", CDT.CUDNN_DATA_HALF: "float16",
          CDT.CUDNN_DATA_BFLOAT16: "bfloat16", CDT.CUDNN_DATA_FP8_E4M3: "fp8", CDT.CUDNN_DATA_FP8_E5M2: "fp8"}


def _worst(labels):
    return max(labels, key=ORDER.index) if labels else "float32"


def tolerance(dtypes, notes):
    """(label, tolerance) for a plan over tensors of ``dtypes`` (cudnnDataType_t) with ``notes``."""
    labels = [_LABEL.get(CDT(int(d)), "float32") for d in dtypes]
    label = _worst(labels)
    notes = {int(n) for n in notes}
    if label in ("float64", "float32"):
        if int(NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE) in notes:
            label = "tf32"
        elif int(NN.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) in notes:
            label = "float16"
    if int(NN.CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) in notes:
        label = _worst([label, "float16"])
    tol = TOL[label]
    if int(NN.CUDNN_NUMERICAL_NOTE_WINOGRAD) in notes:
        tol = max(tol, 4 * TOL["float32"])
    return label, tol


#: the largest finite value of each floating output type, and where rounding to it overflows (half an ulp of
#: the largest binade above it): a float64 oracle value beyond that is +-inf in the output type
_FINITE = {"float16": (65504.0, 65520.0), "bfloat16": (3.3895313892515355e38, 3.3961775292304610e38),
           "float32": (3.4028234663852886e38, 3.4028235677973366e38)}


def _rounded_range(ref, dtype):
    """``ref`` with the values the output type cannot hold as finite numbers set to +-inf, as rounding the
    exact result to that type gives (an FP16 gradient of -1.0e5 is -inf in FP16: the right answer)."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _FINITE:
        return ref
    over = np.isfinite(ref) & (np.abs(ref) >= _FINITE[name][1])
    if not over.any():
        return ref
    ref = np.array(ref, np.float64, copy=True)
    ref[over] = np.copysign(np.inf, ref[over])
    return ref


def compare(got, ref, dtype, tol, magnitude=None):
    """None when ``got`` matches ``ref`` (exactly for integer / boolean ``dtype``), else a short reason.

    ``magnitude`` (optional, ``ref``'s shape): the same op over the inputs' absolute values, for ops whose
    rounding error is bounded by it rather than by the result (a sum that cancels); the relative error is
    then taken against the larger of the two norms."""
    kind = np.dtype(dtype).kind
    if kind in "iub":
        bad = int(np.count_nonzero(to_f64(got) != np.asarray(ref, np.float64)))
        return None if bad == 0 else f"{bad} of {np.size(ref)} elements differ (exact type)"
    g, r = to_f64(got), _rounded_range(np.asarray(ref, np.float64), dtype)
    if g.shape != r.shape:
        return f"shape {g.shape} != the oracle's {r.shape}"
    if np.isfinite(r).all() and np.isfinite(g).all():   # the common case: rel_err's norms, without its masks
        denom = np.linalg.norm(r)
        if magnitude is not None:
            denom = max(denom, float(np.linalg.norm(np.asarray(magnitude, np.float64))))
        num = np.linalg.norm(g - r)
        err = float(num / denom) if denom else float(num)
    else:
        err = rel_err(g, r)
        inf = np.isinf(r)
        if err <= tol and not np.array_equal(np.sign(g[inf]), np.sign(r[inf])):
            err = float("inf")                     # an infinity of the wrong sign
    if err <= tol:
        return None
    scale = np.max(np.abs(r[np.isfinite(r)])) if np.isfinite(r).any() else 1.0
    off = ~(np.abs(g - r) <= tol * scale) | (np.isnan(g) != np.isnan(r))
    nan = int(np.count_nonzero(np.isnan(g) & ~np.isnan(r)))
    first = tuple(int(i) for i in np.argwhere(off)[0]) if off.any() else ()
    at = f"; first at {first}: got {g[first]!r}, expected {r[first]!r}" if first else ""
    return f"rel_err {err:.3e} > {tol:.1e}: {int(off.sum())} of {r.size} off, {nan} NaN{at}"
