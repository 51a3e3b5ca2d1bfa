"""Tensor-core matmul graphs: the shapes and layouts engines matmul_tc and matmul_wgmma accept (their
check_support is the contract), so their plans run beside the SIMT ones.

* FP16 / BF16 A and B, every transpose: each operand has a unit stride on one of its matrix dims (row-
  or column-major), K, the leading dims, the contiguous extents and the batch strides multiples of 8
  elements (leading dims padded by 8 or 16 sometimes); batched with the batch broadcast from either
  side; M (A row-major) and N (B column-major) also off the multiple of 8, so the tiles' edges are hit;
  sometimes a bias (per column, per row or full) and an activation in the epilogue, an FP32 output or
  a column-major C.
* FP32 A and B as TF32: the graph selects the TENSOR_CORE note (TF32 is opt-in in pygraph), with
  k-contiguous A and B (B stored (n, k)), the only FP32 layout the tensor-core engines take; plans
  without the note are barred, so only tensor-core plans run (held to the TF32 tolerance).
* FP8 A and B (both e4m3 or both e5m2, k-contiguous, K a multiple of 16): cudnn-frontend's FP8 pattern
  ``C = matmul(A, B) * descale_a * descale_b * scale_d`` (by-value scales or one-element FP32 device
  tensors), sometimes + bias + relu, cast to an FP8 (e4m3), BF16, FP16 or FP32 output.

The scales are powers of two (exact in every type), so only the output's rounding and the sum's order
differ from the oracle. FP8 values are drawn in [-2, 2) and rounded to FP8 as the buffer holds them.

``rng`` draws the structure (types, transposes, broadcast side, epilogue, output, scale placement) and
``shapes`` the sizes and paddings: cases that share a structure compile the same kernels, whose cache
keys name no size (see :data:`.families.VARIANTS`).
"""
from ..testing import SIM
from .spec import DT, Spec, graph, pick

#: M / N where the dim is not the contiguous one (edges), and the multiples of 8 for contiguous dims
FREE = (5, 8, 16, 24, 33) if SIM else (8, 24, 40, 64, 100, 128, 136, 256)
ALIGNED = (8, 16, 24) if SIM else (8, 16, 40, 64, 128, 136, 256)
KS = (8, 16, 24, 32) if SIM else (8, 16, 32, 40, 64, 136, 256)
KS_FP8 = (16, 32) if SIM else (16, 32, 64, 144, 256)
HALF = ((DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
FP8 = ((DT.FP8_E4M3, "fp8_e4m3"), (DT.FP8_E5M2, "fp8_e5m2"))


def _pad(shapes, unit):
    return unit * pick(shapes, (0, 0, 0, 1, 2))


def _operand(shapes, batch, rows, cols, contiguous_cols, unit=8):
    """dims [batch, rows, cols]: ``contiguous_cols`` -> row-major (cols stride 1), else column-major; the
    leading dim and the batch stride padded by multiples of ``unit`` elements (16 bytes of 16-bit data;
    FP8: 16, the kernel reads FP8 pairs as 16-bit halves)."""
    ld = (cols if contiguous_cols else rows) + _pad(shapes, unit)
    plane = ld * (rows if contiguous_cols else cols) + _pad(shapes, unit)
    strides = [plane, ld, 1] if contiguous_cols else [plane, 1, ld]
    return [batch, rows, cols], strides


def _batches(rng, shapes):
    """(batch, A's batch, B's batch): ``rng`` picks the side that broadcasts, ``shapes`` the batch."""
    side = pick(rng, ("both", "both", "both", "a", "b"))
    batch = pick(shapes, (1, 1, 2, 3))
    ba, bb = (batch, batch) if side == "both" or batch == 1 else (batch, 1) if side == "a" else (1, batch)
    return batch, ba, bb


def generate(rng, shapes=None):
    shapes = rng if shapes is None else shapes
    kind = pick(rng, ("half", "tf32", "fp8"), p=(0.6, 0.2, 0.2))
    if kind == "fp8":
        return _fp8(rng, shapes)
    tf32 = kind == "tf32"
    dtype, dname = (DT.FLOAT, "float (TF32)") if tf32 else pick(rng, HALF)
    a_rows = True if tf32 else rng.random() < 0.5          # A (m, k) k-contiguous, else m-contiguous
    b_cols = True if tf32 else rng.random() < 0.5          # B stored (n, k) (k-contiguous), else n-contiguous
    bias_kind = pick(rng, (None, None, "row", "col", "full"))
    act = pick(rng, (None, None, None, "relu", "gelu", "tanh", "sigmoid"))
    c_col, c_float = rng.random() < 0.2, not tf32 and rng.random() < 0.3
    m = pick(shapes, FREE) if a_rows else pick(shapes, ALIGNED)
    n = pick(shapes, FREE) if b_cols else pick(shapes, ALIGNED)
    k = pick(shapes, KS)
    batch, ba, bb = _batches(rng, shapes)
    g = graph(dtype)
    ad, as_ = _operand(shapes, ba, m, k, a_rows)
    bd, bs = _operand(shapes, bb, k, n, not b_cols)
    A = g.tensor(name="A", dim=ad, stride=as_)
    B = g.tensor(name="B", dim=bd, stride=bs)
    C = g.matmul(A, B, name="mm")
    desc = [f"matmul_tc {dname} batch {ba}x{bb} m{m} n{n} k{k} A {'row' if a_rows else 'col'} {as_} "
            f"B {'col' if b_cols else 'row'} {bs}"]
    if bias_kind is not None:
        bias_dims = {"row": [1, 1, n], "col": [1, m, 1], "full": [batch, m, n]}[bias_kind]
        bias = g.tensor(name="bias", dim=bias_dims, stride=[bias_dims[1] * bias_dims[2], bias_dims[2], 1])
        C = g.bias(input=C, bias=bias, name="bias")
        desc.append(f"+ bias {bias_dims}")
    if act is not None:
        C = getattr(g, act)(C, name=act)
        desc.append(f"+ {act}")
    C.set_output(True).set_name("C")
    if c_col:
        ldc = m + pick(shapes, (0, 8))
        C.set_dim([batch, m, n]).set_stride([ldc * n, 1, ldc])
        desc.append(f"C col-major ldc {ldc}")
    if c_float:
        C.set_data_type(DT.FLOAT)
        desc.append("C float")
    if tf32:
        import ncudnn as cudnn

        g.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    return Spec(g, ", ".join(desc))


def _fp8(rng, shapes):
    import ncudnn as cudnn

    dtype, dname = pick(rng, FP8)
    device = int(rng.integers(0, 3))       # the first `device` scales live in device memory
    bias_relu = rng.random() < 0.3
    out, oname = pick(rng, ((DT.FP8_E4M3, "fp8_e4m3"), (DT.BFLOAT16, "bfloat16"), (DT.HALF, "half"),
                            (DT.FLOAT, "float")))
    m, n, k = pick(shapes, FREE), pick(shapes, FREE), pick(shapes, KS_FP8)
    batch, ba, bb = _batches(rng, shapes)
    g = cudnn.pygraph(name="fuzz", io_data_type=dtype, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    ad, as_ = _operand(shapes, ba, m, k, True, 16)
    bd, bs = _operand(shapes, bb, k, n, False, 16)
    A = g.tensor(name="A", dim=ad, stride=as_)
    B = g.tensor(name="B", dim=bd, stride=bs)
    C = g.matmul(A, B, compute_data_type=DT.FLOAT, name="mm")
    scalars, ranges, desc = {}, {"A": (-2.0, 2.0), "B": (-2.0, 2.0)}, []
    for i, (name, v) in enumerate((("descale_a", 0.5), ("descale_b", 0.25), ("scale_d", 2.0))):
        if i < device:
            s = g.tensor(name=name, dim=[1, 1, 1], stride=[1, 1, 1], data_type=DT.FLOAT)
            ranges[name] = (v, v)
        else:
            s = g.tensor(name=name, dim=[1, 1, 1], stride=[1, 1, 1], data_type=DT.FLOAT, is_pass_by_value=True)
            scalars[name] = v
        C = g.mul(C, s, name=f"mul_{name}")
    if bias_relu:
        bias = g.tensor(name="bias", dim=[1, 1, n], stride=[n, n, 1], data_type=DT.FLOAT)
        C = g.relu(g.bias(input=C, bias=bias, name="bias"), name="relu")
        desc.append("+ bias + relu")
    C.set_output(True).set_name("C").set_data_type(out)
    text = f"matmul_tc {dname} batch {ba}x{bb} m{m} n{n} k{k} A {as_} B (n, k) {bs} * descale_a * descale_b * " \
           f"scale_d ({device} in device memory) {' '.join(desc)} -> {oname}"
    return Spec(g, text, ranges=ranges, scalars=scalars)
