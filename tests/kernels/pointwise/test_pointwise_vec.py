"""The vector path of the fused pointwise generator: 16-byte accesses and broadcast operands
(NHWC / NCHW per-channel bias, row and column vectors) against the float64 oracle."""
import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from ncudnn import reference as ref
from ncudnn.kernels.pointwise import fused as pw
from ncudnn.kernels.runtime.dtypes import from_storage, storage_dtype, to_storage
from ncudnn.kernels.pointwise.fused import NodeSpec, OutputSpec, PointwiseSpec, TensorSpec
from ncudnn.testing import assert_close, poison_value
from ncudnn.types import cudnnPointwiseMode_t as PM

cs = pw.contiguous_strides
ADD, RELU, MUL = PM.CUDNN_POINTWISE_ADD, PM.CUDNN_POINTWISE_RELU_FWD, PM.CUDNN_POINTWISE_MUL


def _nhwc(n, c, h, w):
    return (h * w * c, 1, w * c, c)


def _dev_out(spec, m, size):
    st = storage_dtype(spec.outputs[m].dtype)
    return cuda.to_device(np.full(size, poison_value(st) if st.kind != "f" else np.nan, st))


def _run(spec, host_inputs, out_sizes):
    dev_in = [cuda.to_device(to_storage(a).reshape(-1)) for a in host_inputs]
    outs = [_dev_out(spec, m, s) for m, s in enumerate(out_sizes)]
    pw.run_pointwise(spec, *dev_in, *outs)
    return [from_storage(o.copy_to_host(), spec.outputs[m].dtype) for m, o in enumerate(outs)]


def _gather(flat, shape, strides):
    idx = np.zeros(shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[d] = shape[d]
        idx = idx + np.arange(shape[d]).reshape(sh) * s
    return np.asarray(flat).reshape(-1)[idx]


def _bias_relu_spec(shape, x_strides, b_strides, xdt="float32", bdt="float32", odt="float32", vec=4,
                    unroll=2):
    return PointwiseSpec(shape, (TensorSpec(xdt, x_strides), TensorSpec(bdt, b_strides)),
                         (NodeSpec.make(ADD, (0, 1)), NodeSpec.make(RELU, (2,))),
                         (OutputSpec(3, odt, x_strides),), block=32, unroll=unroll, vec=vec)


def _bias_relu_ref(x, bias_b):
    return ref.pointwise(RELU, ref.pointwise(ADD, x.astype(np.float64), bias_b.astype(np.float64)))


@pytest.mark.parametrize("c", [8, 3, 12])
def test_nhwc_channel_bias(rng, c):
    """C = 8: one vector load of 4 channels ("inner"); C = 3: per element; C = 12: non-power-of-2 mod."""
    shape = (2, c, 3, 2)
    n, _, h, w = shape
    st = _nhwc(*shape)
    x_nhwc = rng.standard_normal((n, h, w, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    spec = _bias_relu_spec(shape, st, (0, 1, 0, 0))
    src = pw.generate_source(spec)
    assert "ldv1(" in src if c % 4 == 0 else "ldv1(" not in src
    if c == 8:
        loop = src.split("while")[1]
        assert "//" not in loop and "%" not in loop   # shifts and masks only
    (out,) = _run(spec, [x_nhwc, bias], [x_nhwc.size])
    x = x_nhwc.transpose(0, 3, 1, 2)
    assert_close(_gather(out, shape, st), _bias_relu_ref(x, bias.reshape(1, c, 1, 1)), "float32")


@pytest.mark.parametrize("hw", [(2, 4), (3, 3)])
def test_nchw_channel_bias_fp16(rng, hw):
    """HW = 8: one bias element per vector ("outer"); HW = 9: per element."""
    shape = (2, 3) + hw
    x = rng.standard_normal(shape).astype(np.float16)
    bias = rng.standard_normal(3).astype(np.float32)
    spec = _bias_relu_spec(shape, cs(shape), (0, 1, 0, 0), xdt="float16", odt="float16",
                           vec=pw.auto_vec(_bias_relu_spec(shape, cs(shape), (0, 1, 0, 0), "float16",
                                                           "float32", "float16", vec=1)))
    assert spec.vec == 8   # 16 bytes of float16; the float32 bias is read once per vector / element
    k = pw.build_pointwise(spec)
    if x.size % 8 == 0:   # the bias needs no vector alignment, x and the output do
        assert k.vec_ok([256, 256 + 4, 256]) and not k.vec_ok([256 + 8, 256, 256])
    else:                 # 54 elements: the launch runs the vec = 1 twin
        assert not k.vec_ok([256, 256, 256])
    (out,) = _run(spec, [x, bias], [x.size])
    assert_close(out.reshape(shape), _bias_relu_ref(x, bias.reshape(1, 3, 1, 1)), "float16")


def test_row_and_column_vectors(rng):
    """out = x * col + row: a column vector (outer) and a row vector (inner) over a 2-D tensor."""
    shape = (6, 8)
    x = rng.standard_normal(shape).astype(np.float32)
    col = rng.standard_normal(6).astype(np.float32)
    row = rng.standard_normal(8).astype(np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float32", cs(shape)), TensorSpec("float32", (1, 0)),
                                 TensorSpec("float32", (0, 1))),
                         (NodeSpec.make(MUL, (0, 1)), NodeSpec.make(ADD, (3, 2))),
                         (OutputSpec(4, "float32", cs(shape)), OutputSpec(3, "float32", cs(shape))),
                         block=32, unroll=3, vec=4)
    out, prod = _run(spec, [x, col, row], [x.size, x.size])
    p = x.astype(np.float64) * col[:, None]
    assert_close(prod.reshape(shape), p, "float32")
    assert_close(out.reshape(shape), p + row[None, :], "float32")


@pytest.mark.parametrize("vec", [8, 1])
def test_bf16_dense_and_bf16_to_float32(rng, vec):
    shape = (4, 5, 8)
    a = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    s = np.array([rng.uniform(0.5, 2.0)], np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("bfloat16", cs(shape)), TensorSpec("bfloat16", cs(shape)),
                                 TensorSpec("float32", (0, 0, 0))),
                         (NodeSpec.make(ADD, (0, 1)), NodeSpec.make(RELU, (3,)), NodeSpec.make(MUL, (4, 2))),
                         (OutputSpec(5, "bfloat16", cs(shape)),), block=32, unroll=2, vec=vec)
    (out,) = _run(spec, [a, b, s], [a.size])
    t = np.maximum(a.astype(np.float32) + b.astype(np.float32), 0) * s[0]
    np.testing.assert_array_equal(out.reshape(shape), t.astype(ml_dtypes.bfloat16))
    wide = PointwiseSpec(shape, spec.inputs[:1], (NodeSpec.make(PM.CUDNN_POINTWISE_EXP, (0,)),),
                         (OutputSpec(1, "float32", cs(shape)),), block=32, unroll=2)
    assert pw.auto_vec(wide) == 4
    (e,) = _run(PointwiseSpec(**{**wide.__dict__, "vec": 4}), [a], [a.size])
    assert_close(e.reshape(shape), np.exp(a.astype(np.float64)), "float32")


def test_fp8_saturating_store(rng):
    shape = (64,)
    x = (rng.standard_normal(shape) * 300).astype(np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float32", (1,)),), (NodeSpec.make(PM.CUDNN_POINTWISE_IDENTITY, (0,)),),
                         (OutputSpec(1, "float8_e4m3fn", (1,), saturate=True),), block=32, vec=4)
    (out,) = _run(spec, [x], [x.size])
    want = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


def test_fallbacks_odd_count_and_misaligned_buffer(rng):
    n = 37
    x = rng.standard_normal(n + 1).astype(np.float32)
    spec = PointwiseSpec((n,), (TensorSpec("float32", (1,)),), (NodeSpec.make(PM.CUDNN_POINTWISE_NEG, (0,)),),
                         (OutputSpec(1, "float32", (1,)),), block=32, vec=4)
    k = pw.build_pointwise(spec)
    assert not k.vec_ok([0, 0])                     # 37 % 4 != 0
    (out,) = _run(spec, [x[:n]], [n])
    np.testing.assert_array_equal(out, -x[:n])
    spec36 = PointwiseSpec((36,), spec.inputs, spec.nodes, spec.outputs, block=32, vec=4)
    k36 = pw.build_pointwise(spec36)
    assert k36.vec_ok([256, 512]) and not k36.vec_ok([256 + 4, 512])
    dx = cuda.to_device(x)
    out = _dev_out(spec36, 0, 36)
    k36.launch(dx[1:37], out)                       # input starts 4 bytes into its allocation
    np.testing.assert_array_equal(out.copy_to_host(), -x[1:37])


def test_layouts_that_do_not_fit_the_vector_path():
    shape = (4, 6)
    relu = (NodeSpec.make(RELU, (0,)),)
    permuted = PointwiseSpec(shape, (TensorSpec("float32", (1, 4)),), relu, (OutputSpec(1, "float32", cs(shape)),))
    padded_bias = PointwiseSpec(shape, (TensorSpec("float32", cs(shape)), TensorSpec("float32", (0, 2))),
                                (NodeSpec.make(ADD, (0, 1)),), (OutputSpec(2, "float32", cs(shape)),))
    bool_out = PointwiseSpec(shape, (TensorSpec("float32", cs(shape)),), (NodeSpec.make(PM.CUDNN_POINTWISE_CMP_GT, (0, 0)),),
                             (OutputSpec(1, "bool", cs(shape)),))
    for spec in (permuted, padded_bias, bool_out):
        assert pw.auto_vec(spec) == 1
        with pytest.raises(ValueError):
            PointwiseSpec(spec.shape, spec.inputs, spec.nodes, spec.outputs, vec=4)
    assert pw.auto_vec(PointwiseSpec(shape, (TensorSpec("float64", cs(shape)),), relu,
                                     (OutputSpec(1, "float64", cs(shape)),))) == 2
