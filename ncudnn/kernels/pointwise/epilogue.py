"""Compile-time epilogues: what happens to each fp32 (or fp64) accumulator before it is stored.

An :class:`EpilogueSpec` is a frozen, hashable tuple of steps applied in order after the always-present
blend ``v = alpha * acc (+ beta * out_old, read only when beta != 0)``:

* ``bias(axis)``: ``v += bias[...]`` per column ("col": an output channel / GEMM column) or row, or one
  value ("scalar": element 0 whatever ``b_off``; "batch": one value per GEMM batch, ``b_off`` as the
  kernel computes it when the axis is neither "row" nor "col": the batch offset alone);
* ``vector(axis, mode, swap, **params)``: ``v = mode(v, b)`` (``mode(b, v)`` when ``swap``) for any binary
  float pointwise mode with ``b`` the broadcast operand of ``bias(axis)`` (MUL scale, SUB, MAX, MIN, DIV,
  ...); an ADD with alpha1 = alpha2 = 1 and no swap is ``bias(axis)`` itself (one spec, one cache key);
* packed operands (two or more vector steps): each step carries a ``slot`` j and reads ``bias[b_off + j]``
  from one interleaved buffer ``packed[c * NV + j]`` the engine fills before the GEMM (bias stride NV:
  kernels/pointwise/pack.py, engines/gemm/packing.py);
* ``pointwise(mode, **params)``: any unary cudnnPointwiseMode_t (relu / clipped / leaky relu, gelu,
  swish, tanh, sigmoid, elu, softplus, ...), text from :mod:`ncudnn.kernels.pointwise.ops`;
* ``scale(value)``: ``v *= value`` (a compile-time constant);
* ``residual(mode=ADD, **params)``: ``v = mode(v, r)`` with ``r`` from a second full tensor.

:func:`build` turns a spec into a device function
``fn(v, out, o_off, bias, b_off, res, r_off, alpha, beta)`` that stores the cast result to
``out[o_off]``, used identically by the GEMM kernel, the conv kernels and the split-K reduce.
``raw()`` (store the accumulator unchanged: split-K partials) and ``atomic()`` (``out += alpha*v``
with atomics: NONDETERMINISTIC) are the two special epilogues.
"""
from dataclasses import dataclass

from numba import cuda

from ..runtime import dtypes
from . import ops as pointwise_ops
from ...types import cudnnPointwiseMode_t as PM


@dataclass(frozen=True)
class EpilogueSpec:
    steps: tuple = ()
    out_dtype: str = "float32"
    ftype: str = "float32"      # register type: "float64" only for an all-fp64 problem

    @property
    def bias_axis(self):
        for s in self.steps:
            if s[0] in ("bias", "vector"):
                return s[1]
        return None

    @property
    def has_residual(self):
        return any(s[0] == "residual" for s in self.steps)

    @property
    def linear(self):
        """Only alpha/beta: the form atomic split-K can apply."""
        return not self.steps

    def then(self, *steps):
        return EpilogueSpec(self.steps + tuple(steps), self.out_dtype, self.ftype)


def _params_key(params):
    return tuple(sorted(params.items()))


#: the broadcast operand's axes: per row, per column, one value, one value per GEMM batch
AXES = ("row", "col", "scalar", "batch")


def bias(axis="col", slot=None):
    """``v += bias[b_off]``; ``slot`` j (packed operands): ``bias[b_off + j]``, the kernels' ``b_off`` being
    the index times the bias stride NV (the operand count) over an interleaved buffer."""
    if axis not in AXES:
        raise ValueError(f"bias axis must be one of {AXES}")
    return ("bias", axis) if slot is None else ("bias", axis, int(slot))


def vector(axis, mode, swap=False, slot=None, **params):
    """``v = mode(v, b)`` (``mode(b, v)`` when ``swap``) with ``b`` the broadcast operand on ``axis``
    (at ``b_off + slot`` with ``slot``: see :func:`bias`)."""
    mode = PM(mode)
    if pointwise_ops.arity(mode) != 2 or pointwise_ops.result_kind(mode) != "float":
        raise ValueError(f"{mode.name} is not a binary float pointwise step")
    pointwise_ops.normalize_params(params)
    unit = params.get("alpha1", 1.0) == 1.0 and params.get("alpha2", 1.0) == 1.0
    if mode == PM.CUDNN_POINTWISE_ADD and unit and not swap:
        return bias(axis, slot)
    if axis not in AXES:
        raise ValueError(f"vector axis must be one of {AXES}")
    step = ("vector", axis, int(mode), _params_key(params), bool(swap))
    return step if slot is None else step + (int(slot),)


def pointwise(mode, **params):
    mode = PM(mode)
    if pointwise_ops.arity(mode) != 1 or pointwise_ops.result_kind(mode) != "float":
        raise ValueError(f"{mode.name} is not a unary float pointwise step")
    pointwise_ops.normalize_params(params)
    return ("pointwise", int(mode), _params_key(params))


def scale(value):
    return ("scale", float(value))


def residual(mode=PM.CUDNN_POINTWISE_ADD, **params):
    mode = PM(mode)
    if pointwise_ops.arity(mode) != 2 or pointwise_ops.result_kind(mode) != "float":
        raise ValueError(f"{mode.name} is not a binary float pointwise step")
    pointwise_ops.normalize_params(params)
    return ("residual", int(mode), _params_key(params))


def relu(**params):
    return pointwise(PM.CUDNN_POINTWISE_RELU_FWD, **params)


def _dtype_name(dtype):
    return dtypes.dtype_name(dtype)


def _globals(spec=None, in_dtypes=None):
    g = dict(pointwise_ops.expr_globals())
    g["cuda"] = cuda
    if spec is not None:
        g["ld_out"] = dtypes.loader(spec.out_dtype, spec.ftype)
        g["st_out"] = dtypes.storer(spec.out_dtype)
        g["ld_bias"] = dtypes.loader(in_dtypes["bias"], spec.ftype)
        g["ld_res"] = dtypes.loader(in_dtypes["res"], spec.ftype)
    return g


class Built:
    """A compiled epilogue: ``fn`` plus the flags the kernels need and a key.

    BIAS ("row" | "col" | None), RESIDUAL (bool), STAGE (True when the body is too big for LLVM to
    unroll a thread tile's worth of it: the kernel then stages the accumulators, see mainloop.py).
    """

    def __init__(self, key, fn, bias_axis=None, residual=False, source="", stage=False):
        self.key, self.fn, self.BIAS, self.RESIDUAL, self.source = key, fn, bias_axis, residual, source
        self.STAGE = stage


_CACHE = {}


def _compile(key, src, name, g=None, **flags):
    if key not in _CACHE:
        g = g if g is not None else _globals()
        exec(compile(src, f"<epilogue {name}>", "exec"), g)
        _CACHE[key] = Built(key, cuda.jit(device=True, inline=True)(g[name]), source=src, **flags)
    return _CACHE[key]


def source(spec):
    """Source text of the epilogue device function (loads / stores through kernels/runtime/dtypes.py)."""
    F = spec.ftype
    L = [f"def epilogue(v, out, o_off, bias, b_off, res, r_off, alpha, beta):",
         f"    v = {F}(alpha) * v",
         f"    if beta != 0:",
         f"        v = v + {F}(beta) * ld_out(out, o_off)"]
    L += step_lines(spec, F)
    L.append("    st_out(out, o_off, v)")
    return "\n".join(L) + "\n"


def step_lines(spec, F):
    """The body lines of ``spec``'s steps (register ``v`` of type ``F``; ``ld_bias`` / ``ld_res`` loaders),
    shared by :func:`source` and the wgmma value epilogue."""
    L = []
    for step in spec.steps:
        kind = step[0]
        if kind in ("bias", "vector"):
            off = "0" if step[1] == "scalar" else "b_off"
            slot = step[2] if kind == "bias" and len(step) == 3 else step[5] if len(step) == 6 else None
            if slot:
                off = f"{off} + {slot}" if off != "0" else str(slot)
            if kind == "bias":
                L.append(f"    v = v + ld_bias(bias, {off})")
            else:
                L.append(f"    bv = ld_bias(bias, {off})")
                args = ["bv", "v"] if step[4] else ["v", "bv"]
                L.append(f"    v = {pointwise_ops.expr(step[2], args, dict(step[3]), F)}")
        elif kind == "scale":
            L.append(f"    v = v * {pointwise_ops.lit(step[1], F)}")
        elif kind == "pointwise":
            L.append(f"    v = {pointwise_ops.expr(step[1], ['v'], dict(step[2]), F)}")
        elif kind == "residual":
            L.append("    r = ld_res(res, r_off)")
            L.append(f"    v = {pointwise_ops.expr(step[1], ['v', 'r'], dict(step[2]), F)}")
        else:
            raise ValueError(f"unknown epilogue step {step!r}")
    return L


def build(spec, bias_dtype="float32", res_dtype="float32"):
    """The device function for ``spec`` (cached by spec and input dtypes)."""
    dts = {"bias": _dtype_name(bias_dtype), "res": _dtype_name(res_dtype)}
    spec = EpilogueSpec(spec.steps, _dtype_name(spec.out_dtype), spec.ftype)
    key = ("epilogue", spec, dts["bias"], dts["res"])
    small = spec.linear and spec.out_dtype in ("float32", "float64", "float16")
    return _compile(key, source(spec), "epilogue", _globals(spec, dts), bias_axis=spec.bias_axis,
                    residual=spec.has_residual, stage=not small)


def raw(ftype="float32"):
    """Store the accumulator unchanged (split-K partials into an ``ftype`` workspace)."""
    src = ("def epilogue(v, out, o_off, bias, b_off, res, r_off, alpha, beta):\n"
           "    out[o_off] = v\n")
    return _compile(("raw", ftype), src, "epilogue")


def atomic():
    """``out[o_off] += alpha * v`` atomically (NONDETERMINISTIC summation order); out pre-scaled by beta."""
    src = ("def epilogue(v, out, o_off, bias, b_off, res, r_off, alpha, beta):\n"
           "    cuda.atomic.add(out, o_off, v * alpha)\n")
    built = _compile(("atomic",), src, "epilogue")
    return built
