"""Matmul graphs: C = A @ B over every transpose of A and B (row- or column-major, leading dims padded),
batched with the batch broadcast from either side, FP32 / FP16 / BF16 / FP64, sometimes with a bias and
an activation fused after it and the output in another layout or type. About a third of the plain
matmuls are built through the backend API instead of pygraph.

``rng`` draws the structure (types, layouts, broadcast side, epilogue, front end) and ``shapes`` the
sizes and paddings: cases that share a structure compile the same kernels, whose cache keys name the
configuration, layouts, types and epilogue but no size (see :data:`.families.VARIANTS`)."""
from ..testing import SIM
from .spec import DT, Spec, graph, pick

SIZES = (1, 2, 3, 4, 5, 8) if SIM else (1, 2, 3, 5, 8, 16, 17, 32, 33, 64, 65)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"), (DT.DOUBLE, "double"))


def _operand(col, shapes, batch, rows, cols):
    """dims [batch, rows, cols] with row- or column-major strides (``col``), leading dim and batch
    stride padded sometimes."""
    ld = (rows if col else cols) + (int(shapes.integers(1, 4)) if shapes.random() < 0.3 else 0)
    plane = ld * (cols if col else rows) + (int(shapes.integers(1, 5)) if shapes.random() < 0.2 else 0)
    strides = [plane, 1, ld] if col else [plane, ld, 1]
    return [batch, rows, cols], strides, "col" if col else "row"


def generate(rng, shapes=None):
    shapes = rng if shapes is None else shapes
    dtype, dname = pick(rng, DTYPES, p=(0.4, 0.25, 0.2, 0.15))
    a_col, b_col = rng.random() < 0.5, rng.random() < 0.5
    side = pick(rng, ("both", "both", "a", "b"))     # which operand keeps the batch (the other broadcasts)
    epi = rng.random()
    act = pick(rng, ("relu", "gelu", "tanh", "sigmoid"))
    bias_kind = pick(rng, ("row", "col", "full"))
    c_col, c_float = rng.random() < 0.25, rng.random() < 0.3
    backend = rng.random() < 0.35
    m, n, k = (pick(shapes, SIZES) for _ in range(3))
    batch = pick(shapes, (1, 1, 2, 3))
    ba, bb = (batch, batch) if side == "both" or batch == 1 else (batch, 1) if side == "a" else (1, batch)
    g = graph(dtype)
    ad, as_, al = _operand(a_col, shapes, ba, m, k)
    bd, bs, bl = _operand(b_col, shapes, bb, k, n)
    A = g.tensor(name="A", dim=ad, stride=as_)
    B = g.tensor(name="B", dim=bd, stride=bs)
    C = g.matmul(A, B, name="mm")
    desc = [f"matmul {dname} batch {ba}x{bb} m{m} n{n} k{k} A {al} {as_} B {bl} {bs}"]
    if epi < 0.3:
        bias_dims = {"row": [1, 1, n], "col": [1, m, 1], "full": [batch, m, n]}[bias_kind]
        bias = g.tensor(name="bias", dim=bias_dims, stride=[bias_dims[1] * bias_dims[2], bias_dims[2], 1])
        C = g.bias(input=C, bias=bias, name="bias")
        desc.append(f"+ bias {bias_dims}")
    if epi < 0.15 or 0.3 <= epi < 0.45:
        C = getattr(g, act)(C, name=act)
        desc.append(f"+ {act}")
    C.set_output(True).set_name("C")
    if c_col:
        ldc = m + int(shapes.integers(0, 3))
        C.set_dim([batch, m, n]).set_stride([ldc * n, 1, ldc])
        desc.append(f"C col-major ldc {ldc}")
    if dtype in (DT.HALF, DT.BFLOAT16) and c_float:
        C.set_data_type(DT.FLOAT)
        desc.append("C float")
    # a K-term dot product of values in [-1, 1]: the norm tolerance holds for every K drawn here
    fe = "backend" if len(desc) == 1 and backend else "pygraph"
    return Spec(g, ", ".join(desc) + (" [backend API]" if fe == "backend" else ""), front_end=fe)
