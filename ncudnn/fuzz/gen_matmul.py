"""Matmul graphs: C = A @ B over every transpose of A and B (row- or column-major, leading dims padded),
batched with the batch broadcast from either side, FP32 / FP16 / BF16 / FP64, sometimes with a bias and
an activation fused after it and the output in another layout or type. About a third of the plain
matmuls are built through the backend API instead of pygraph."""
from ..testing import SIM
from .spec import DT, Spec, graph, pick

SIZES = (1, 2, 3, 4, 5, 8) if SIM else (1, 2, 3, 5, 8, 16, 17, 32, 33, 64, 65)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"), (DT.DOUBLE, "double"))


def _operand(rng, batch, rows, cols):
    """dims [batch, rows, cols] with row- or column-major strides, leading dim and batch stride padded."""
    col = rng.random() < 0.5
    ld = (rows if col else cols) + (int(rng.integers(1, 4)) if rng.random() < 0.3 else 0)
    plane = ld * (cols if col else rows) + (int(rng.integers(1, 5)) if rng.random() < 0.2 else 0)
    strides = [plane, 1, ld] if col else [plane, ld, 1]
    return [batch, rows, cols], strides, "col" if col else "row"


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.4, 0.25, 0.2, 0.15))
    m, n, k = (pick(rng, SIZES) for _ in range(3))
    batch = pick(rng, (1, 1, 2, 3))
    ba, bb = batch, batch
    if batch > 1 and rng.random() < 0.3:
        ba, bb = (1, batch) if rng.random() < 0.5 else (batch, 1)
    g = graph(dtype)
    ad, as_, al = _operand(rng, ba, m, k)
    bd, bs, bl = _operand(rng, bb, k, n)
    A = g.tensor(name="A", dim=ad, stride=as_)
    B = g.tensor(name="B", dim=bd, stride=bs)
    C = g.matmul(A, B, name="mm")
    desc = [f"matmul {dname} batch {ba}x{bb} m{m} n{n} k{k} A {al} {as_} B {bl} {bs}"]
    epi = rng.random()
    if epi < 0.3:
        bias_dims = pick(rng, ([1, 1, n], [1, m, 1], [batch, m, n]))
        bias = g.tensor(name="bias", dim=bias_dims, stride=[bias_dims[1] * bias_dims[2], bias_dims[2], 1])
        C = g.bias(input=C, bias=bias, name="bias")
        desc.append(f"+ bias {bias_dims}")
    if epi < 0.15 or 0.3 <= epi < 0.45:
        act = pick(rng, ("relu", "gelu", "tanh", "sigmoid"))
        C = getattr(g, act)(C, name=act) if act != "relu" else g.relu(C, name=act)
        desc.append(f"+ {act}")
    C.set_output(True).set_name("C")
    if rng.random() < 0.25:
        ldc = m + int(rng.integers(0, 3))
        C.set_dim([batch, m, n]).set_stride([ldc * n, 1, ldc])
        desc.append(f"C col-major ldc {ldc}")
    if dtype in (DT.HALF, DT.BFLOAT16) and rng.random() < 0.3:
        C.set_data_type(DT.FLOAT)
        desc.append("C float")
    # a K-term dot product of values in [-1, 1]: the norm tolerance holds for every K drawn here
    fe = "backend" if len(desc) == 1 and rng.random() < 0.35 else "pygraph"
    return Spec(g, ", ".join(desc) + (" [backend API]" if fe == "backend" else ""), front_end=fe)
