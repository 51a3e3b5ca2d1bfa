"""Pointwise DAGs: 1-6 nodes over 1-4 graph inputs broadcast from [1, ...] dims, values reused by several
nodes, by-value scalars, padded input and output strides, FP32 / FP16 / BF16 / FP64.

Every value carries an interval its elements lie in; an op is drawn only where its operands are inside
the op's well-conditioned domain (log / sqrt / rsqrt / reciprocal / divisors of at least 1/4, exp of at
most 3, |tan| argument at most 1.2, results kept within +-64), so the float64 oracle and an FP32
kernel agree to rounding. Discontinuous ops (floor, ceil, fmod, comparisons) take only graph inputs,
whose values both sides hold exactly.
"""
import math

from ..testing import SIM
from .spec import DT, Spec, capped, graph, pick, rand_strides

DIMS = (1, 2, 3, 4, 5) if SIM else (1, 2, 3, 4, 5, 7, 8, 16, 33)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"), (DT.DOUBLE, "double"))
LIMIT = 64.0


def _mono(f):
    return lambda lo, hi: (min(f(lo), f(hi)), max(f(lo), f(hi)))


#: unary op -> (domain test on (lo, hi), result interval)
UNARY = {
    "neg": (lambda lo, hi: True, lambda lo, hi: (-hi, -lo)),
    "abs": (lambda lo, hi: True, lambda lo, hi: (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))),
    "tanh": (lambda lo, hi: True, _mono(math.tanh)),
    "sigmoid": (lambda lo, hi: True, _mono(lambda v: 1 / (1 + math.exp(-v)))),
    "sin": (lambda lo, hi: True, lambda lo, hi: (-1.0, 1.0)),
    "cos": (lambda lo, hi: True, lambda lo, hi: (-1.0, 1.0)),
    "erf": (lambda lo, hi: True, _mono(math.erf)),
    "exp": (lambda lo, hi: hi <= 3, _mono(math.exp)),
    "log": (lambda lo, hi: lo >= 0.25, _mono(math.log)),
    "sqrt": (lambda lo, hi: lo >= 0.25, _mono(math.sqrt)),
    "rsqrt": (lambda lo, hi: lo >= 0.25, _mono(lambda v: 1 / math.sqrt(v))),
    "reciprocal": (lambda lo, hi: lo >= 0.25 or hi <= -0.25, _mono(lambda v: 1 / v)),
    "relu": (lambda lo, hi: True, lambda lo, hi: (max(lo, 0.0), max(hi, 0.0))),
    "gelu": (lambda lo, hi: True, lambda lo, hi: (-0.2, max(hi, 0.0))),
    "elu": (lambda lo, hi: True, lambda lo, hi: (-1.0, max(hi, 0.0))),
    "softplus": (lambda lo, hi: True, lambda lo, hi: (0.0, max(hi, 0.0) + 0.7)),
    "swish": (lambda lo, hi: True, lambda lo, hi: (-0.3, max(hi, 0.0))),
    "tan": (lambda lo, hi: max(abs(lo), abs(hi)) <= 1.2, _mono(math.tan)),
    "identity": (lambda lo, hi: True, lambda lo, hi: (lo, hi)),
}
EXACT_UNARY = {"floor": _mono(math.floor), "ceil": _mono(math.ceil)}


def _corners(f):
    def out(a, b):
        vals = [f(x, y) for x in a for y in b]
        return min(vals), max(vals)
    return out


#: binary op -> (domain test on the two intervals, result interval)
BINARY = {
    "add": (lambda a, b: True, lambda a, b: (a[0] + b[0], a[1] + b[1])),
    "sub": (lambda a, b: True, lambda a, b: (a[0] - b[1], a[1] - b[0])),
    "mul": (lambda a, b: True, _corners(lambda x, y: x * y)),
    "max": (lambda a, b: True, lambda a, b: (max(a[0], b[0]), max(a[1], b[1]))),
    "min": (lambda a, b: True, lambda a, b: (min(a[0], b[0]), min(a[1], b[1]))),
    "div": (lambda a, b: b[0] >= 0.25 or b[1] <= -0.25, _corners(lambda x, y: x / y)),
    "add_square": (lambda a, b: True, lambda a, b: (a[0], a[1] + max(b[0] ** 2, b[1] ** 2))),
    "pow": (lambda a, b: a[0] >= 0.25 and max(abs(b[0]), abs(b[1])) <= 2, _corners(lambda x, y: x ** y)),
}
COMPARE = ("cmp_gt", "cmp_ge", "cmp_lt", "cmp_le", "cmp_eq", "cmp_neq")


class _Val:
    def __init__(self, t, lo, hi, exact, full, name):
        self.t, self.lo, self.hi, self.exact, self.full, self.name, self.uses = t, lo, hi, exact, full, name, 0


def _input(g, rng, dims, full, k, vals, ranges):
    d = list(dims) if full else [x if rng.random() < 0.6 else 1 for x in dims]
    lo, hi = pick(rng, ((-1.0, 1.0), (0.5, 2.0), (-2.0, 2.0)))
    name = f"x{k}"
    t = g.tensor(name=name, dim=d, stride=rand_strides(rng, d))
    ranges[name] = (lo, hi)
    v = _Val(t, lo, hi, True, full, name)
    vals.append(v)
    return v


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.45, 0.25, 0.2, 0.1))
    rank = int(rng.integers(1, 6))
    dims = capped([pick(rng, DIMS) for _ in range(rank)])
    g = graph(dtype)
    vals, ranges, desc = [], {}, []
    _input(g, rng, dims, True, 0, vals, ranges)
    for k in range(1, int(rng.integers(1, 4))):
        _input(g, rng, dims, False, k, vals, ranges)
    nodes = int(rng.integers(1, 7))
    made = 0
    for step in range(nodes * 4):
        if made == nodes:
            break
        unused = [v for v in vals if v.uses == 0] or vals
        a = pick(rng, unused)
        kind = rng.random()
        name = f"n{made}"
        if kind < 0.35:
            op = pick(rng, sorted(UNARY))
            ok, iv = UNARY[op]
            if not ok(a.lo, a.hi):
                continue
            lo, hi = iv(a.lo, a.hi)
            t = getattr(g, op)(a.t, name=name)
            ins, exact = [a], False
        elif kind < 0.42:
            if not a.exact:
                continue
            op = pick(rng, sorted(EXACT_UNARY))
            lo, hi = EXACT_UNARY[op](a.lo, a.hi)
            t = getattr(g, op)(a.t, name=name)
            ins, exact = [a], True
        elif kind < 0.5:
            b = pick(rng, vals)
            if not (a.exact and b.exact):
                continue
            op = pick(rng, COMPARE + ("mod",))
            if op == "mod":
                if b.lo < 0.5:
                    continue
                lo, hi = -max(abs(a.lo), abs(a.hi)), max(abs(a.lo), abs(a.hi))
                t = g.mod(a.t, b.t, name=name)
            else:
                lo, hi = 0.0, 1.0
                t = getattr(g, op)(a.t, b.t, name=name)
            ins, exact = [a, b], True
        else:
            op = pick(rng, sorted(BINARY))
            scalar = rng.random() < 0.15
            if scalar:
                s = float(pick(rng, (0.5, 1.5, -0.75, 2.0)))
                if op in ("div", "pow") and s < 0.25:
                    continue
                b_iv, b_t, ins = (s, s), s, [a]
            else:
                b = pick(rng, vals)
                b_iv, b_t, ins = (b.lo, b.hi), b.t, [a, b]
            ok, iv = BINARY[op]
            if not ok((a.lo, a.hi), b_iv):
                continue
            lo, hi = iv((a.lo, a.hi), b_iv)
            fn = getattr(g, op)
            t = fn(a.t, b_t, name=name)
            exact = False
        if max(abs(lo), abs(hi)) > LIMIT:
            continue
        for v in ins:
            v.uses += 1
        full = any(v.full for v in ins)
        vals.append(_Val(t, lo, hi, exact, full, name))
        desc.append(f"{name}={op}({','.join(v.name for v in ins)})")
        made += 1
    produced = [v for v in vals if v.name.startswith("n")]
    if not produced:
        vals.append(_Val(g.identity(vals[0].t, name="n0"), vals[0].lo, vals[0].hi, True, True, "n0"))
        produced = vals[-1:]
        desc.append("n0=identity(x0)")
    outs = [v for v in produced if v.uses == 0]
    if rng.random() < 0.3 and len(produced) > len(outs):
        outs.append(pick(rng, [v for v in produced if v.uses]))
    for v in outs:
        v.t.set_output(True)
        if rng.random() < 0.25:
            v.t.set_data_type(pick(rng, (DT.FLOAT, DT.HALF)))
        if rng.random() < 0.3 and v.full:
            v.t.set_dim(list(dims)).set_stride(rand_strides(rng, dims))
    return Spec(g, f"pointwise {dname} dims {dims}: " + " ".join(desc) + f" -> {[v.name for v in outs]}",
                ranges=ranges)
