"""Strided output views inside a graph: every plan the heuristics return writes a declared-strided output
exactly at its strides (elements beside the view untouched) or is refused by check_support.

The rotary-embedding pattern: y1 = x1 * cos - x2 * sin, y2 = x2 * cos + x1 * sin over the two halves of
the last dimension of one buffer, out of place into halves of a larger buffer and in place over the
input (the two halves are one fused kernel, which reads every element before writing it; as two
kernels the first overwrote what the second still read). Undeclared strides with a strided view given
are BAD_PARAM (the view is never written as if packed). Against the float64 oracle, fresh random
inputs, poisoned outputs."""
import numpy as np
import pytest
from numba import cuda

import ncudnn as cudnn
from ncudnn import memory
from ncudnn.testing import assert_close, poison_value, random, size
from ncudnn.types import cudnnStatus_t as S


def lastdim(a, s):
    """a[..., s] for arrays whose indexing takes no Ellipsis (numba device arrays on a GPU)."""
    return a[(slice(None),) * (a.ndim - 1) + (s,)]

B, H, SEQ, D = size((2, 2, 3, 8), (4, 16, 512, 128))
HALF = D // 2
FULL = [B, H, SEQ, D]
STRIDES = list(memory.packed_strides(FULL))


def poisoned(shape):
    return cuda.to_device(np.full(shape, poison_value(np.float32), np.float32))


def rotary_graph(in_strides=STRIDES, out_strides=STRIDES):
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    half = [B, H, SEQ, HALF]
    X1 = g.tensor(name="X1", dim=half, stride=in_strides)
    X2 = g.tensor(name="X2", dim=half, stride=in_strides)
    C = g.tensor(name="COS", dim=[1, 1, SEQ, HALF])
    Sn = g.tensor(name="SIN", dim=[1, 1, SEQ, HALF])
    Y1 = g.sub(a=g.mul(a=X1, b=C), b=g.mul(a=X2, b=Sn), name="y1")
    Y2 = g.add(a=g.mul(a=X2, b=C), b=g.mul(a=X1, b=Sn), name="y2")
    for y in (Y1, Y2):
        y.set_output(True)
        if out_strides is not None:
            y.set_stride(out_strides)
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    return g, (X1, X2, C, Sn, Y1, Y2)


def rotary_oracle(x, c, s):
    x = x.astype(np.float64)
    x1, x2 = lastdim(x, slice(None, HALF)), lastdim(x, slice(HALF, None))
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def _inputs(rng):
    return random(rng, FULL), random(rng, [1, 1, SEQ, HALF]), random(rng, [1, 1, SEQ, HALF])


def _built_plans(g):
    built = [i for i in range(g.get_execution_plan_count()) if i in g._built]
    assert built, "no plan built"
    return built


def _workspace(g, i):
    n = int(g._built[i].workspace_size)
    return cuda.device_array(n, np.uint8) if n else None


def test_rotary_out_of_place_into_halves_of_a_larger_buffer(rng):
    wide = FULL[:-1] + [2 * D]  # the halves land in the first D columns; the rest is never written
    g, (X1, X2, C, Sn, Y1, Y2) = rotary_graph(out_strides=list(memory.packed_strides(wide)))
    x, c, s = _inputs(rng)
    xd = cuda.to_device(x)
    for i in _built_plans(g):
        big = poisoned(wide)
        g.execute_plan_at_index({X1: lastdim(xd, slice(None, HALF)), X2: lastdim(xd, slice(HALF, None)), C: cuda.to_device(c),
                                 Sn: cuda.to_device(s), Y1: lastdim(big, slice(None, HALF)), Y2: lastdim(big, slice(HALF, D))},
                                _workspace(g, i), index=i)
        out = big.copy_to_host()
        assert_close(lastdim(out, slice(None, D)), rotary_oracle(x, c, s), "float32", name=f"plan {i}")
        assert np.isnan(lastdim(out, slice(D, None))).all(), f"plan {i} wrote beside its views"


def test_rotary_in_place_over_its_input(rng):
    g, (X1, X2, C, Sn, Y1, Y2) = rotary_graph()
    x, c, s = _inputs(rng)
    for i in _built_plans(g):
        buf = cuda.to_device(x)
        pack = {X1: lastdim(buf, slice(None, HALF)), X2: lastdim(buf, slice(HALF, None)), C: cuda.to_device(c), Sn: cuda.to_device(s),
                Y1: lastdim(buf, slice(None, HALF)), Y2: lastdim(buf, slice(HALF, None))}
        g.execute_plan_at_index(pack, _workspace(g, i), index=i)
        assert_close(buf.copy_to_host(), rotary_oracle(x, c, s), "float32", name=f"plan {i} in place")


def test_rotary_undeclared_output_strides_refuse_a_strided_view(rng):
    g, (X1, X2, C, Sn, Y1, Y2) = rotary_graph(out_strides=None)
    assert Y1.get_stride() == list(memory.packed_strides([B, H, SEQ, HALF]))  # inferred packed
    x, c, s = _inputs(rng)
    xd, big = cuda.to_device(x), poisoned(FULL)
    with pytest.raises(cudnn.cudnnGraphBadParamError) as e:
        g.execute({X1: lastdim(xd, slice(None, HALF)), X2: lastdim(xd, slice(HALF, None)), C: cuda.to_device(c), Sn: cuda.to_device(s),
                   Y1: lastdim(big, slice(None, HALF)), Y2: lastdim(big, slice(HALF, None))}, None)
    assert e.value.status == S.CUDNN_STATUS_BAD_PARAM and "y1::" in str(e.value) and "strides" in str(e.value)
    assert np.isnan(big.copy_to_host()).all()


@pytest.mark.parametrize("kind", ["relu", "matmul"])
def test_every_plan_writes_a_column_half_exactly_or_refuses(rng, kind):
    """A single op writing one half of the last dim of a larger buffer, through every plan of A + FALLBACK."""
    M, K, N = size((8, 16, 8), (512, 256, 512))
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    a = random(rng, [1, M, K])
    A = g.tensor(name="A", dim=[1, M, K])
    if kind == "matmul":
        b = random(rng, [1, K, N])
        Bt = g.tensor(name="B", dim=[1, K, N])
        Y = g.matmul(A=A, B=Bt)
        ref, cols = a.astype(np.float64) @ b, N
    else:
        Y = g.relu(input=A)
        ref, cols = np.maximum(a.astype(np.float64), 0), K
    Y.set_output(True).set_stride([M * 2 * cols, 2 * cols, 1])
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    ran = 0
    for i in _built_plans(g):
        big = poisoned([1, M, 2 * cols])
        pack = {A: cuda.to_device(a), Y: lastdim(big, slice(cols, None))}
        if kind == "matmul":
            pack[Bt] = cuda.to_device(b)
        g.execute_plan_at_index(pack, _workspace(g, i), index=i)
        out = big.copy_to_host()
        assert_close(lastdim(out, slice(cols, None)), ref, "tf32" if kind == "matmul" else "float32", name=f"plan {i}")
        assert np.isnan(lastdim(out, slice(None, cols))).all(), f"plan {i} wrote beside its view"
        ran += 1
    assert ran


@pytest.mark.gpu
def test_rotary_in_place_with_torch_views(rng):
    torch = pytest.importorskip("torch")
    g, (X1, X2, C, Sn, Y1, Y2) = rotary_graph()
    x, c, s = _inputs(rng)
    buf = torch.from_numpy(x).cuda()
    g.execute({X1: lastdim(buf, slice(None, HALF)), X2: lastdim(buf, slice(HALF, None)), C: torch.from_numpy(c).cuda(),
               Sn: torch.from_numpy(s).cuda(), Y1: lastdim(buf, slice(None, HALF)), Y2: lastdim(buf, slice(HALF, None))}, None)
    torch.cuda.synchronize()
    assert_close(buf.cpu().numpy(), rotary_oracle(x, c, s), "float32")
