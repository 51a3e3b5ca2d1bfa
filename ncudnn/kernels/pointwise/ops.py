"""Every cudnnPointwiseMode_t as the numba source text of one scalar expression.

Kernel generators (runtime-fused pointwise kernels, GEMM/conv epilogues) build their kernels from
these strings: each operand is the *name* of a register already holding a value, the result is an
expression to assign to a new register. All arithmetic is in ``ftype`` ("float32" by default;
"float64" when every I/O tensor is float64): every literal is wrapped as ``float32(...)`` so no
silent float64 creeps in. The names the expressions use are in :func:`expr_globals`.

Semantics are those of the float64 oracle ``ncudnn.reference.pointwise`` (its docstring lists every
mode). Operand roles:

* unary: ``[x]``; binary: ``[x, b]``; ``BINARY_SELECT``: ``[x, b, c]`` -> ``x if c else b``;
* ``*_BWD``: ``[dy, x]`` (dy = incoming gradient, x = forward input) -> dx;
* ``GEN_INDEX``: ``[coord]`` where coord is the register holding the element's coordinate along
  ``params["axis"]`` (an integer); the generator supplies it (see :func:`gen_index_axis`).

Params (the lower-cased backend attribute names): relu_lower_clip, relu_upper_clip,
relu_lower_clip_slope, elu_alpha, softplus_beta, swish_beta, axis, nan_propagation, alpha1, alpha2
(operand scales of forward/math modes).

Result kinds (:func:`result_kind`): "float" (an ``ftype`` value), "bool" (comparisons and logical
modes) or "index" (an integer: GEN_INDEX). A consumer that needs a float wraps the register with
``ftype(...)`` (see :func:`operand_kinds`).
"""
import math

import numba

from ...types import cudnnNanPropagation_t, cudnnPointwiseMode_t as PM

__all__ = ["expr", "arity", "result_kind", "operand_kinds", "expr_globals", "lit", "is_backward",
           "gen_index_axis", "normalize_params", "SUPPORTED_MODES"]

_UNARY_MATH = {
    PM.CUDNN_POINTWISE_ABS: "abs({x})",
    PM.CUDNN_POINTWISE_CEIL: "math.ceil({x})",
    PM.CUDNN_POINTWISE_COS: "math.cos({x})",
    PM.CUDNN_POINTWISE_EXP: "math.exp({x})",
    PM.CUDNN_POINTWISE_FLOOR: "math.floor({x})",
    PM.CUDNN_POINTWISE_LOG: "math.log({x})",
    PM.CUDNN_POINTWISE_NEG: "(-{x})",
    PM.CUDNN_POINTWISE_RSQRT: "({one} / math.sqrt({x}))",
    PM.CUDNN_POINTWISE_SIN: "math.sin({x})",
    PM.CUDNN_POINTWISE_SQRT: "math.sqrt({x})",
    PM.CUDNN_POINTWISE_TAN: "math.tan({x})",
    PM.CUDNN_POINTWISE_ERF: "math.erf({x})",
    PM.CUDNN_POINTWISE_IDENTITY: "({x})",
    PM.CUDNN_POINTWISE_RECIPROCAL: "({one} / {x})",
    PM.CUDNN_POINTWISE_TANH_FWD: "math.tanh({x})",
    PM.CUDNN_POINTWISE_SIGMOID_FWD: "({one} / ({one} + math.exp(-{x})))",
}
_BINARY_MATH = {
    PM.CUDNN_POINTWISE_ADD: "({x} + {b})",
    PM.CUDNN_POINTWISE_SUB: "({x} - {b})",
    PM.CUDNN_POINTWISE_MUL: "({x} * {b})",
    PM.CUDNN_POINTWISE_DIV: "({x} / {b})",
    PM.CUDNN_POINTWISE_ADD_SQUARE: "({x} + {b} * {b})",
    PM.CUDNN_POINTWISE_POW: "math.pow({x}, {b})",
    PM.CUDNN_POINTWISE_ATAN2: "math.atan2({x}, {b})",
    PM.CUDNN_POINTWISE_MOD: "math.fmod({x}, {b})",
    PM.CUDNN_POINTWISE_FLOOR_MOD: "({x} - math.floor({x} / {b}) * {b})",
}
_CMP = {
    PM.CUDNN_POINTWISE_CMP_EQ: "({x} == {b})",
    PM.CUDNN_POINTWISE_CMP_NEQ: "({x} != {b})",
    PM.CUDNN_POINTWISE_CMP_GT: "({x} > {b})",
    PM.CUDNN_POINTWISE_CMP_GE: "({x} >= {b})",
    PM.CUDNN_POINTWISE_CMP_LT: "({x} < {b})",
    PM.CUDNN_POINTWISE_CMP_LE: "({x} <= {b})",
}
_LOGICAL = {
    PM.CUDNN_POINTWISE_LOGICAL_AND: "(({x} != {zero}) & ({b} != {zero}))",
    PM.CUDNN_POINTWISE_LOGICAL_OR: "(({x} != {zero}) | ({b} != {zero}))",
}
_FWD = {PM.CUDNN_POINTWISE_RELU_FWD, PM.CUDNN_POINTWISE_ELU_FWD, PM.CUDNN_POINTWISE_GELU_FWD,
        PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, PM.CUDNN_POINTWISE_SOFTPLUS_FWD,
        PM.CUDNN_POINTWISE_SWISH_FWD}
_BWD = {PM.CUDNN_POINTWISE_RELU_BWD, PM.CUDNN_POINTWISE_TANH_BWD, PM.CUDNN_POINTWISE_SIGMOID_BWD,
        PM.CUDNN_POINTWISE_ELU_BWD, PM.CUDNN_POINTWISE_GELU_BWD, PM.CUDNN_POINTWISE_SOFTPLUS_BWD,
        PM.CUDNN_POINTWISE_SWISH_BWD, PM.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD}
_MINMAX = {PM.CUDNN_POINTWISE_MAX, PM.CUDNN_POINTWISE_MIN}

#: modes whose expression costs tens of instructions (transcendentals): a fused kernel holding one is
#: compute-heavy enough for its loads to be scheduled late unless it has registers to spare
HEAVY_MODES = frozenset({PM.CUDNN_POINTWISE_EXP, PM.CUDNN_POINTWISE_LOG, PM.CUDNN_POINTWISE_TANH_FWD,
                         PM.CUDNN_POINTWISE_SIGMOID_FWD, PM.CUDNN_POINTWISE_ELU_FWD, PM.CUDNN_POINTWISE_GELU_FWD,
                         PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, PM.CUDNN_POINTWISE_SOFTPLUS_FWD,
                         PM.CUDNN_POINTWISE_SWISH_FWD, PM.CUDNN_POINTWISE_TANH_BWD, PM.CUDNN_POINTWISE_SIGMOID_BWD,
                         PM.CUDNN_POINTWISE_ELU_BWD, PM.CUDNN_POINTWISE_GELU_BWD, PM.CUDNN_POINTWISE_SOFTPLUS_BWD,
                         PM.CUDNN_POINTWISE_SWISH_BWD, PM.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD,
                         PM.CUDNN_POINTWISE_ERF, PM.CUDNN_POINTWISE_POW, PM.CUDNN_POINTWISE_SIN,
                         PM.CUDNN_POINTWISE_COS, PM.CUDNN_POINTWISE_TAN})

SUPPORTED_MODES = frozenset(
    set(_UNARY_MATH) | set(_BINARY_MATH) | set(_CMP) | set(_LOGICAL) | _FWD | _BWD | _MINMAX
    | {PM.CUDNN_POINTWISE_LOGICAL_NOT, PM.CUDNN_POINTWISE_GEN_INDEX,
       PM.CUDNN_POINTWISE_BINARY_SELECT})

_DEFAULTS = dict(relu_lower_clip=0.0, relu_upper_clip=math.inf, relu_lower_clip_slope=0.0,
                 elu_alpha=1.0, softplus_beta=1.0, swish_beta=1.0, axis=-1, alpha1=1.0, alpha2=1.0,
                 nan_propagation=int(cudnnNanPropagation_t.CUDNN_NOT_PROPAGATE_NAN))

_SQRT_HALF = 0.7071067811865476      # 1/sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327   # 1/sqrt(2 pi)
_K_TANH = 0.7978845608028654         # sqrt(2/pi)
_C_TANH = 0.044715


def normalize_params(params):
    """Params with defaults filled in; unknown names raise TypeError."""
    params = dict(params or {})
    unknown = set(params) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown pointwise params {sorted(unknown)}")
    p = dict(_DEFAULTS)
    p.update(params)
    p["nan_propagation"] = int(p["nan_propagation"])
    return p


def arity(mode):
    """Number of tensor operands: 1, 2 or 3."""
    mode = PM(mode)
    if mode == PM.CUDNN_POINTWISE_BINARY_SELECT:
        return 3
    if (mode in _UNARY_MATH or mode in _FWD or mode == PM.CUDNN_POINTWISE_LOGICAL_NOT
            or mode == PM.CUDNN_POINTWISE_GEN_INDEX):
        return 1
    return 2


def is_backward(mode):
    return PM(mode) in _BWD


def result_kind(mode):
    """"float", "bool" (comparisons, logical ops) or "index" (GEN_INDEX)."""
    mode = PM(mode)
    if mode in _CMP or mode in _LOGICAL or mode == PM.CUDNN_POINTWISE_LOGICAL_NOT:
        return "bool"
    if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
        return "index"
    return "float"


def operand_kinds(mode):
    """What each operand must be: "float" (wrap bool/index registers in ftype()) or "any"."""
    mode = PM(mode)
    if mode in _LOGICAL or mode == PM.CUDNN_POINTWISE_LOGICAL_NOT:
        return ["any"] * arity(mode)
    if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
        return ["index"]
    if mode == PM.CUDNN_POINTWISE_BINARY_SELECT:
        return ["float", "float", "any"]
    return ["float"] * arity(mode)


def gen_index_axis(params, ndim):
    """The (non-negative) axis whose coordinate GEN_INDEX reads."""
    axis = int(normalize_params(params)["axis"])
    if not -ndim <= axis < ndim:
        raise ValueError(f"GEN_INDEX axis {axis} out of range for rank {ndim}")
    return axis % ndim


def lit(value, ftype="float32"):
    """A literal of type ``ftype`` as source text (inf and nan included)."""
    v = float(value)
    if math.isnan(v):
        text = "math.nan"
    elif math.isinf(v):
        text = "math.inf" if v > 0 else "-math.inf"
    else:
        text = repr(v)
    return f"{ftype}({text})"


#: GELU in float32 without erf: GELU(x) = x * Phi(x), Phi(x) = 1 - e (x >= 0) or e (x < 0), with
#: e = Phi(-|x|) = 0.5 * exp(-(x^2 / 2 + q(|x|))) and q(a) = -ln(erfc(a / sqrt 2)) - a^2 / 2 a degree-11
#: polynomial in u = min(a, 6) / 3 - 1 (Chebyshev least squares on [0, 6], fitted here; |dq| <= 4e-7
#: in float32). Branch-free (libdevice erff takes a divergent exp branch for |x| > 1.3) and about half
#: the instructions; accuracy: max relative error 1e-6 where |GELU| > 1e-3, norm-wise 3e-8 against
#: float64 over N(0, 9) inputs (the erf form: 4e-7, from 1 + erf cancelling for negative x).
GELU_Q = (-0.00024644177756272256, 0.00047060332144610584, 6.067250433261506e-05, -0.0011424542171880603,
          0.003575204638764262, -0.010660775005817413, 0.02750873751938343, -0.06392176449298859,
          0.14161671698093414, -0.3175138533115387, 0.8492960333824158, 1.4145790338516235)


def _gelu_f32_source():
    L = ["def gelu_f32(x):",
         "    a = abs(x)",
         "    u = min(a, float32(6.0)) * float32(0.3333333333333333) - float32(1.0)",
         f"    q = float32({GELU_Q[0]!r})"]
    L += [f"    q = q * u + float32({c!r})" for c in GELU_Q[1:]]
    L += ["    e = float32(0.5) * math.exp(-(float32(0.5) * a * a + q))",
          "    return x * (float32(1.0) - e if x >= float32(0.0) else e)"]
    return "\n".join(L) + "\n"


def _make_gelu_f32():
    from numba import cuda

    ns = {"math": math, "float32": numba.float32}
    exec(compile(_gelu_f32_source(), "<gelu_f32>", "exec"), ns)
    return cuda.jit(device=True, inline=True)(ns["gelu_f32"])


_GELU_F32 = []


def expr_globals():
    """Names the expression texts refer to: put these in the exec namespace of generated code."""
    if not _GELU_F32:
        _GELU_F32.append(_make_gelu_f32())
    return {"math": math, "float32": numba.float32, "float64": numba.float64, "gelu_f32": _GELU_F32[0]}


def _times(value, x, L):
    """``value * x`` as text, or just ``x`` when value is 1."""
    return f"({x})" if float(value) == 1.0 else f"({L(value)} * {x})"


def _sigmoid(z, one):
    return f"({one} / ({one} + math.exp(-({z}))))"


def _relu_fwd(x, p, L):
    lo, hi, slope = p["relu_lower_clip"], p["relu_upper_clip"], p["relu_lower_clip_slope"]
    low = L(lo) if slope == 0.0 else f"({L(lo)} + {L(slope)} * ({x} - {L(lo)}))"
    t = f"({x} if {x} >= {L(lo)} else {low})"
    if hi != math.inf:
        t = f"({L(hi)} if {t} > {L(hi)} else {t})"
    if p["nan_propagation"] == cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN:
        return f"({x} if {x} != {x} else {t})"
    return f"({L(lo)} if {x} != {x} else {t})"


def _fwd(mode, x, p, L):
    one, half = L(1.0), L(0.5)
    if mode == PM.CUDNN_POINTWISE_RELU_FWD:
        return _relu_fwd(x, p, L)
    if mode == PM.CUDNN_POINTWISE_ELU_FWD:
        return f"({x} if {x} > {L(0.0)} else {_times(p['elu_alpha'], f'math.expm1({x})', L)})"
    if mode == PM.CUDNN_POINTWISE_GELU_FWD:
        if one.startswith("float32("):
            return f"gelu_f32({x})"
        return f"({half} * {x} * ({one} + math.erf({x} * {L(_SQRT_HALF)})))"
    if mode == PM.CUDNN_POINTWISE_GELU_APPROX_TANH_FWD:
        u = f"{L(_K_TANH)} * ({x} + {L(_C_TANH)} * {x} * {x} * {x})"
        return f"({half} * {x} * ({one} + math.tanh({u})))"
    if mode == PM.CUDNN_POINTWISE_SOFTPLUS_FWD:
        beta = p["softplus_beta"]
        z = _times(beta, x, L)
        soft = f"(({z} if {z} > {L(0.0)} else {L(0.0)}) + math.log1p(math.exp(-abs({z}))))"
        return soft if float(beta) == 1.0 else f"({soft} / {L(beta)})"
    if mode == PM.CUDNN_POINTWISE_SWISH_FWD:
        return f"({x} * {_sigmoid(_times(p['swish_beta'], x, L), one)})"
    raise AssertionError(mode)


def _bwd_deriv(mode, x, p, L):
    """f'(x) of the forward function matching a *_BWD mode, as text."""
    one, half, zero = L(1.0), L(0.5), L(0.0)
    if mode == PM.CUDNN_POINTWISE_RELU_BWD:
        lo, hi = L(p["relu_lower_clip"]), p["relu_upper_clip"]
        inside = one if hi == math.inf else f"({zero} if {x} >= {L(hi)} else {one})"
        # the ties x == lower / upper clip take the outer slope (cuDNN: no gradient at x == 0)
        return f"({L(p['relu_lower_clip_slope'])} if {x} <= {lo} else {inside})"
    if mode == PM.CUDNN_POINTWISE_TANH_BWD:
        return f"({one} - math.tanh({x}) * math.tanh({x}))"
    if mode == PM.CUDNN_POINTWISE_SIGMOID_BWD:
        s = _sigmoid(x, one)
        return f"({s} * ({one} - {s}))"
    if mode == PM.CUDNN_POINTWISE_ELU_BWD:
        return f"({one} if {x} > {zero} else {_times(p['elu_alpha'], f'math.exp({x})', L)})"
    if mode == PM.CUDNN_POINTWISE_GELU_BWD:
        cdf = f"{half} * ({one} + math.erf({x} * {L(_SQRT_HALF)}))"
        pdf = f"{L(_INV_SQRT_2PI)} * math.exp({L(-0.5)} * {x} * {x})"
        return f"({cdf} + {x} * {pdf})"
    if mode == PM.CUDNN_POINTWISE_GELU_APPROX_TANH_BWD:
        k, c = L(_K_TANH), L(_C_TANH)
        t = f"math.tanh({k} * ({x} + {c} * {x} * {x} * {x}))"
        return (f"({half} * ({one} + {t} + {k} * {x} * ({one} - {t} * {t}) "
                f"* ({one} + {L(3.0 * _C_TANH)} * {x} * {x})))")
    if mode == PM.CUDNN_POINTWISE_SOFTPLUS_BWD:
        return _sigmoid(_times(p["softplus_beta"], x, L), one)
    if mode == PM.CUDNN_POINTWISE_SWISH_BWD:
        bx = _times(p["swish_beta"], x, L)
        s = _sigmoid(bx, one)
        return f"({s} + {bx} * {s} * ({one} - {s}))"
    raise AssertionError(mode)


def _scaled(arg, alpha, L):
    return arg if float(alpha) == 1.0 else f"({L(alpha)} * {arg})"


def expr(mode, args, params=None, ftype="float32"):
    """Source text of ``mode`` applied to the registers named in ``args`` (see module docstring).

    ``ftype`` is "float32" or "float64": the type of every literal (and of the result, for float
    results). Raises ValueError on a wrong operand count, TypeError on unknown params.
    """
    mode = PM(mode)
    if mode not in SUPPORTED_MODES:
        raise ValueError(f"unsupported pointwise mode {mode.name}")
    n = arity(mode)
    if len(args) != n:
        raise ValueError(f"{mode.name} takes {n} operand(s), got {len(args)}")
    p = normalize_params(params)

    def L(v):
        return lit(v, ftype)

    one = L(1.0)
    if mode in _BWD:
        dy, x = args
        return f"({dy} * {_bwd_deriv(mode, x, p, L)})"
    if mode == PM.CUDNN_POINTWISE_GEN_INDEX:
        return f"({args[0]})"
    if mode == PM.CUDNN_POINTWISE_BINARY_SELECT:
        x, b, c = args
        return f"({x} if {c} else {b})"
    if mode == PM.CUDNN_POINTWISE_LOGICAL_NOT:
        return f"({args[0]} == {L(0.0)})"
    if mode in _LOGICAL:
        return _LOGICAL[mode].format(x=args[0], b=args[1], zero=L(0.0))
    x = _scaled(args[0], p["alpha1"], L)
    if n == 1:
        if mode in _UNARY_MATH:
            return _UNARY_MATH[mode].format(x=x, one=one)
        return _fwd(mode, x, p, L)
    b = _scaled(args[1], p["alpha2"], L)
    if mode in _CMP:
        return _CMP[mode].format(x=x, b=b)
    if mode in _BINARY_MATH:
        return _BINARY_MATH[mode].format(x=x, b=b)
    propagate = p["nan_propagation"] == cudnnNanPropagation_t.CUDNN_PROPAGATE_NAN
    op = ">=" if mode == PM.CUDNN_POINTWISE_MAX else "<="
    if propagate:   # NaN in either operand wins
        return f"({x} if ({x} != {x} or {x} {op} {b}) else {b})"
    return f"({x} if ({x} {op} {b} or {b} != {b}) else {b})"   # fmax/fmin: NaN loses
