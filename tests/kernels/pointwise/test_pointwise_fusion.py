"""Runtime-fused pointwise kernels (ncudnn.kernels.pointwise.fused) against the float64 oracle."""
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


def _run(spec, host_inputs, out_sizes):
    """Launch with device copies of the storage form of host_inputs; outputs poisoned first."""
    dev_in = [cuda.to_device(to_storage(a)) for a in host_inputs]
    outs = []
    for o, size in zip(spec.outputs, out_sizes):
        st = storage_dtype(o.dtype)
        poison = poison_value(st) if st.kind != "f" else np.nan
        outs.append(cuda.to_device(np.full(size, poison, st)))
    pw.run_pointwise(spec, *dev_in, *outs)
    return [from_storage(o.copy_to_host(), spec.outputs[m].dtype) for m, o in enumerate(outs)]


def _strided(host, shape, strides):
    """Gather a flat buffer's elements at (coord . strides) into a dense array of ``shape``."""
    idx = np.zeros(shape, np.int64)
    for d, s in enumerate(strides):
        sh = [1] * len(shape)
        sh[d] = shape[d]
        idx = idx + np.arange(shape[d]).reshape(sh) * s
    return np.asarray(host).reshape(-1)[idx]


def test_dense_chain_bias_relu_scale(rng):
    shape = (3, 5, 7)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float16)
    s = np.array([rng.uniform(0.5, 2.0)], np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float32", cs(shape)), TensorSpec("float16", cs(shape)),
                                 TensorSpec("float32", (0, 0, 0))),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_RELU_FWD, (3,)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
                         (OutputSpec(5, "float32", cs(shape)), OutputSpec(3, "bfloat16", cs(shape))),
                         block=32, unroll=2)
    assert pw.build_pointwise(spec).dense
    out, out_bf = _run(spec, [x, y, s], [x.size, x.size])
    t = ref.pointwise(PM.CUDNN_POINTWISE_ADD, x, y)
    expected = ref.pointwise(PM.CUDNN_POINTWISE_MUL, ref.pointwise(PM.CUDNN_POINTWISE_RELU_FWD, t), s)
    assert_close(out.reshape(shape), expected, "float32")
    assert_close(out_bf.reshape(shape), t, "bfloat16")
    # the bf16 store is round-to-nearest-even of the f32 value
    np.testing.assert_array_equal(out_bf.reshape(shape),
                                  (x + y.astype(np.float32)).astype(ml_dtypes.bfloat16))


def test_broadcast_bias_nchw_general_path(rng):
    shape = (2, 3, 4, 5)
    x = rng.standard_normal(shape).astype(np.float16)
    bias = rng.standard_normal(3).astype(np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float16", cs(shape)), TensorSpec("float32", (0, 1, 0, 0))),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_GELU_FWD, (2,))),
                         (OutputSpec(3, "float16", cs(shape)),), block=32, unroll=3)
    k = pw.build_pointwise(spec)
    assert not k.dense
    (out,) = _run(spec, [x, bias], [x.size])
    expected = ref.pointwise(PM.CUDNN_POINTWISE_GELU_FWD, x.astype(np.float64) + bias.reshape(1, 3, 1, 1))
    assert_close(out.reshape(shape), expected, "float16")


def test_permuted_layouts_nhwc_in_nchw_out(rng):
    n, c, h, w = 2, 3, 3, 4
    shape = (n, c, h, w)
    nhwc = (h * w * c, 1, w * c, c)   # NCHW-indexed strides of an NHWC buffer
    xbuf = rng.standard_normal(n * c * h * w).astype(np.float32)
    bbuf = rng.standard_normal(n * c * h * w).astype(np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float32", nhwc), TensorSpec("float32", cs(shape))),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_SUB, (0, 1)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_ELU_FWD, (2,), elu_alpha=0.3)),
                         (OutputSpec(3, "float32", cs(shape)), OutputSpec(2, "float32", nhwc)),
                         block=32, unroll=2)
    out, out_nhwc = _run(spec, [xbuf, bbuf], [xbuf.size, xbuf.size])
    x = _strided(xbuf, shape, nhwc)
    b = bbuf.reshape(shape)
    d = ref.pointwise(PM.CUDNN_POINTWISE_SUB, x, b)
    assert_close(out.reshape(shape), ref.pointwise(PM.CUDNN_POINTWISE_ELU_FWD, d, elu_alpha=0.3),
                 "float32")
    assert_close(_strided(out_nhwc, shape, nhwc), d, "float32")


def test_gen_index_compare_select_and_bool_output(rng):
    shape = (4, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.uniform(0, 6, (4, 1)).astype(np.float32)   # a per-row threshold
    spec = PointwiseSpec(shape, (TensorSpec("float32", cs(shape)), TensorSpec("float32", (1, 0))),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_GEN_INDEX, (0,), axis=1),     # 2
                          NodeSpec.make(PM.CUDNN_POINTWISE_CMP_LT, (2, 1)),              # 3
                          NodeSpec.make(PM.CUDNN_POINTWISE_NEG, (0,)),                   # 4
                          NodeSpec.make(PM.CUDNN_POINTWISE_BINARY_SELECT, (0, 4, 3)),    # 5
                          NodeSpec.make(PM.CUDNN_POINTWISE_LOGICAL_NOT, (3,))),          # 6
                         (OutputSpec(5, "float32", cs(shape)), OutputSpec(6, "bool", cs(shape)),
                          OutputSpec(2, "int32", cs(shape))), block=32, unroll=1)
    out, mask, idx = _run(spec, [x, t], [x.size] * 3)
    gi = ref.pointwise(PM.CUDNN_POINTWISE_GEN_INDEX, x, axis=1)
    lt = ref.pointwise(PM.CUDNN_POINTWISE_CMP_LT, gi, t)
    expected = ref.pointwise(PM.CUDNN_POINTWISE_BINARY_SELECT, x, -x, lt)
    assert_close(out.reshape(shape), expected, "float32")
    np.testing.assert_array_equal(mask.reshape(shape), ~lt)
    np.testing.assert_array_equal(idx.reshape(shape), gi.astype(np.int32))


def test_float64_io_computes_in_float64(rng):
    shape = (37,)
    x = rng.uniform(0.5, 2.0, shape)
    spec = PointwiseSpec(shape, (TensorSpec("float64", (1,)),),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_LOG, (0,)),
                          NodeSpec.make(PM.CUDNN_POINTWISE_SWISH_FWD, (1,), swish_beta=1.5)),
                         (OutputSpec(2, "float64", (1,)),), block=32, unroll=2)
    assert "float64(" in pw.generate_source(spec) and "float32(" not in pw.generate_source(spec)
    (out,) = _run(spec, [x], [x.size])
    expected = ref.pointwise(PM.CUDNN_POINTWISE_SWISH_FWD, np.log(x), swish_beta=1.5)
    assert_close(out, expected, "float64")


def test_grid_stride_loop_and_ragged_tail(rng):
    """More elements than one grid pass (the simulator caps the grid at 4 blocks)."""
    shape = (301,)
    x = rng.standard_normal(shape).astype(np.float32)
    spec = PointwiseSpec(shape, (TensorSpec("float32", (1,)),),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_TANH_FWD, (0,)),),
                         (OutputSpec(1, "float8_e4m3fn", (1,)),), block=32, unroll=2)
    (out,) = _run(spec, [x], [x.size])
    np.testing.assert_array_equal(out.view(np.uint8),
                                  np.tanh(x).astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_cache_dense_kernel_shared_across_shapes():
    def spec(shape):
        return PointwiseSpec(shape, (TensorSpec("float32", cs(shape)),),
                             (NodeSpec.make(PM.CUDNN_POINTWISE_EXP, (0,)),),
                             (OutputSpec(1, "float32", cs(shape)),))
    a, b = pw.build_pointwise(spec((4, 5))), pw.build_pointwise(spec((70,)))
    assert pw.cache_key(spec((4, 5))) == pw.cache_key(spec((70,)))
    assert a.kernel is b.kernel and b.numel == 70
    assert pw.build_pointwise(spec((4, 5))) is a


def test_spec_validation():
    with pytest.raises(ValueError):   # operand refers to a later node
        PointwiseSpec((4,), (TensorSpec("float32", (1,)),),
                      (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 2)),
                       NodeSpec.make(PM.CUDNN_POINTWISE_EXP, (0,))),
                      (OutputSpec(1, "float32", (1,)),))
    with pytest.raises(ValueError):   # wrong arity
        PointwiseSpec((4,), (TensorSpec("float32", (1,)),),
                      (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0,)),), (OutputSpec(1, "float32", (1,)),))
    spec = PointwiseSpec((4,), (TensorSpec("float32", (1,)),),
                         (NodeSpec.make(PM.CUDNN_POINTWISE_EXP, (0,)),), (OutputSpec(1, "float32", (1,)),))
    with pytest.raises(ValueError):   # output buffer too small
        pw.run_pointwise(spec, cuda.to_device(np.ones(4, np.float32)),
                         cuda.to_device(np.ones(3, np.float32)))


@pytest.mark.parametrize("n", [2 * 97, 97], ids=["packed", "odd-falls-back"])
def test_packed_bf16_words_match_scalar_path(rng, n):
    shape = (n,)
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    s = np.array([rng.uniform(0.5, 2.0)], np.float32)

    def spec(pack):
        return PointwiseSpec(shape, (TensorSpec("bfloat16", (1,)), TensorSpec("bfloat16", (1,)),
                                     TensorSpec("float32", (0,))),
                             (NodeSpec.make(PM.CUDNN_POINTWISE_ADD, (0, 1)),
                              NodeSpec.make(PM.CUDNN_POINTWISE_SWISH_FWD, (3,)),
                              NodeSpec.make(PM.CUDNN_POINTWISE_MUL, (4, 2))),
                             (OutputSpec(5, "bfloat16", (1,)), OutputSpec(3, "bfloat16", (1,))),
                             block=32, unroll=2, pack=pack)
    assert pw.packable(spec(1)) and "x0_0a, x0_0b = ld0" in pw.generate_source(spec(2))
    wide = _run(spec(2), [x, y, s], [n, n])
    narrow = _run(spec(1), [x, y, s], [n, n])
    for a, b in zip(wide, narrow):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    t = ref.pointwise(PM.CUDNN_POINTWISE_ADD, x, y)
    expected = ref.pointwise(PM.CUDNN_POINTWISE_MUL, ref.pointwise(PM.CUDNN_POINTWISE_SWISH_FWD, t), s)
    assert_close(wide[0], expected, "bfloat16")


def test_pack_needs_bf16_dense():
    with pytest.raises(ValueError):
        PointwiseSpec((8,), (TensorSpec("float32", (1,)),),
                      (NodeSpec.make(PM.CUDNN_POINTWISE_EXP, (0,)),),
                      (OutputSpec(1, "bfloat16", (1,)),), pack=2)
