"""The kernels the GEMM-family engines build (their configs, layouts, epilogues and argument types),
compiled for sm_90 without a GPU: no spills, local memory only where the epilogue stages."""
import os

import pytest

from ncudnn.kernels.runtime import kcache

HERE = os.path.dirname(os.path.abspath(__file__))


def _engine_kernel(which):
    """(BlockKernels, argument types) the engine builds for a GPU-size problem of ``which``."""
    from ncudnn.engines import api, registry
    from ncudnn.engines.gemm import common as gc
    from ncudnn.ir import ConvFprop, Matmul, OpGraph, Pointwise, TensorDesc, packed_strides
    from ncudnn.ir.tensor import nhwc_order
    from ncudnn.kernels.gemm import make_gemm
    from ncudnn.kernels.gemm.launch import kernel_args
    from ncudnn.types import cudnnDataType_t as DT, cudnnPointwiseMode_t as PM

    f32 = DT.CUDNN_DATA_FLOAT

    def t(uid, dims, order=None):
        return TensorDesc(uid, dims, packed_strides(dims, order), f32, name=f"t{uid}")

    def chain(anchor, out_port, bias, res, out):
        add = Pointwise("bias", {"X": anchor.outputs[out_port], "B": bias}, {"Y": TensorDesc(11, is_virtual=True)},
                        mode=PM.CUDNN_POINTWISE_ADD)
        radd = Pointwise("res", {"X": add.outputs["Y"], "B": res}, {"Y": TensorDesc(12, is_virtual=True)},
                         mode=PM.CUDNN_POINTWISE_ADD)
        relu = Pointwise("relu", {"X": radd.outputs["Y"]}, {"Y": out}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
        return OpGraph([anchor, add, radd, relu]).finalize()

    if which == "matmul":
        mm = Matmul("mm", {"A": t(1, (1, 512, 512)), "B": t(2, (1, 512, 512))}, {"C": TensorDesc(10, is_virtual=True)})
        g = chain(mm, "C", t(3, (1, 1, 512)), t(4, (1, 512, 512)), t(5, (1, 512, 512)))
        eng = registry.by_name("matmul_simt")
    else:
        o = nhwc_order(4)
        conv = ConvFprop("conv", {"X": t(1, (32, 64, 28, 28), o), "W": t(2, (64, 64, 3, 3), o)},
                         {"Y": TensorDesc(10, is_virtual=True)}, spatial_dims=2, stride=(1, 1), pre_padding=(1, 1),
                         post_padding=(1, 1), dilation=(1, 1))
        g = chain(conv, "Y", t(3, (1, 64, 1, 1), o), t(4, (32, 64, 28, 28), o), t(5, (32, 64, 28, 28), o))
        eng = registry.by_name("conv_implicit_precomp")
    sub = api.problem(g)
    cfg = eng.default_config(sub)  # TILE_SIZE 0: the best measured tile
    p = eng.problem(sub)
    gcfg = eng.gemm_config(cfg)

    def arg(tt):
        return gc.typing_flat(tt, tt.span_elements())
    if which == "matmul":
        kern = make_gemm(gcfg, p.a_layout, p.b_layout, p.dtypes, p.epi.spec)
        packed = p.pack(kern, arg)
    else:
        import numpy as np
        kern = p.make(gcfg, True)
        packed = p.pack(kern, arg, gc.Flat(0, kern.table_size(p.g) // 4, np.int32))
    return kern.bk, gc.argtypes(kernel_args(kern.bk, *packed, 1.0, 0.0, None))


def sm90_kernel(which):
    return _engine_kernel(which)[0].kernel


def sm90_signature_matmul(_kernel):
    return _engine_kernel("matmul")[1]


def sm90_signature_conv(_kernel):
    return _engine_kernel("conv")[1]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["matmul", "conv"])
def test_engine_gemm_kernels_compile_for_sm90(monkeypatch, which):
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("test_gemm_engine_kernels_sm90:sm90_kernel", f"test_gemm_engine_kernels_sm90:sm90_signature_{which}",
                                         args=(which,), cc=(9, 0))
    bk = _engine_kernel(which)[0]
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert r["local"] <= bk.local_bytes, r
    assert r["registers"] <= 255, r
