"""Convolution algorithm <-> engine mapping, math types, perf structs, MaxCount, Get_v7 / Find shapes."""
import numpy as np
import pytest

import ncudnn
import ncudnn.legacy as L
from ncudnn.engines.base import Config
from ncudnn.engines.ranking import EngineConfig
from ncudnn.legacy import algos as A
from ncudnn.legacy import lower
from ncudnn.types import cudnnBackendNumericalNote_t as NN

from .conftest import dev, engines_for, fdesc, tdesc

S = ncudnn.cudnnStatus_t
OK = S.CUDNN_STATUS_SUCCESS
FA, DA, WA = A.FA, A.DA, A.WA


class FakeEngine:
    def __init__(self, name, kinds=("conv_fprop", "conv_dgrad", "conv_wgrad")):
        self.name, self.kinds, self.global_index = name, kinds, 99


def ec(name, t=1.0, notes=(), ws=0):
    return EngineConfig(FakeEngine(name), Config(name, ()), tuple(notes), (), ws, t)


def test_max_counts(handle):
    assert L.cudnnGetConvolutionForwardAlgorithmMaxCount(handle) == (OK, 8)
    assert L.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle) == (OK, 6)
    assert L.cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle) == (OK, 7)
    assert L.cudnnGetConvolutionForwardAlgorithmMaxCount(None)[0] == S.CUDNN_STATUS_BAD_PARAM


def test_table_names_map_to_their_families():
    for name, fams in A.ENGINE_FAMILY.items():
        for direction, fam in fams.items():
            assert A.family_of(name, direction) == fam


@pytest.mark.parametrize("name, notes, direction, want", [
    ("conv_fft", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT),
    ("conv_fft_tiling", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING),
    ("anything", (NN.CUDNN_NUMERICAL_NOTE_WINOGRAD,), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD),
    ("winograd_nonfused_v2", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED),
    ("conv_direct_small", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT),
    ("igemm_precomp", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
    ("conv_im2col", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_GEMM),
    ("conv_igemm", (), "fwd", FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
    ("conv_new", (), "dgrad", DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1),
    ("conv_new", (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,), "dgrad", DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0),
    ("conv_new", (NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,), "wgrad", WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0),
    ("conv_winograd", (), "wgrad", WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED),
])
def test_unknown_engines_classified_by_notes_and_name(name, notes, direction, want):
    assert A.family_of(name, direction, notes) == want


def test_every_non_fft_algorithm_has_an_engine_family_and_fft_has_none():
    # BWD_FILTER_ALGO_WINOGRAD (fused) is not implemented by cuDNN either
    for direction in ("fwd", "dgrad", "wgrad"):
        for algo in A.algos(direction):
            fams = A.SUBSTITUTES[direction].get(algo, ())
            if "FFT" in algo.name or algo is WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
                assert not fams
            else:
                assert fams and fams[0] == algo


def test_configs_for_prefers_own_family_then_substitutes():
    ig, pre, wino = ec("conv_implicit_gemm", 2.0), ec("conv_implicit_precomp_gemm", 1.0), ec("conv_winograd", 0.5)
    ranked = [wino, pre, ig]
    assert A.configs_for(ranked, FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "fwd") == [ig, pre]
    assert A.configs_for(ranked, FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "fwd") == [pre, ig]
    assert A.configs_for(ranked, FA.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "fwd") == [ig, pre]
    assert A.configs_for(ranked, FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "fwd") == [wino]
    assert A.configs_for(ranked, FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fwd") == []
    assert A.configs_for([ig], FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "fwd") == []


def test_composite_config_classified_by_its_conv_part():
    conv = ec("conv_winograd")
    pw = EngineConfig(FakeEngine("pointwise_fused", ("pointwise",)), Config("pointwise_fused", ()))
    comp = EngineConfig(FakeEngine("composite", ("composite",)), Config("composite", ()), parts=(pw, conv))
    assert A.config_family(comp, "fwd") == FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD


def test_perf_struct_fields_determinism_and_math():
    nd = ec("x", notes=(NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE))
    assert A.determinism(nd) == ncudnn.CUDNN_NON_DETERMINISTIC
    assert A.determinism(ec("y")) == ncudnn.CUDNN_DETERMINISTIC
    assert A.math_type(nd, ncudnn.CUDNN_DEFAULT_MATH) == ncudnn.CUDNN_DEFAULT_MATH
    assert A.math_type(ec("y"), ncudnn.CUDNN_DEFAULT_MATH) == ncudnn.CUDNN_FMA_MATH
    for cls, enum in ((L.cudnnConvolutionFwdAlgoPerf_t, FA), (L.cudnnConvolutionBwdDataAlgoPerf_t, DA),
                      (L.cudnnConvolutionBwdFilterAlgoPerf_t, WA)):
        p = cls(1, OK, 0.5, 256, 0, 3)
        assert (p.algo, p.status, p.time, p.memory, p.determinism, p.mathType) == \
            (enum(1), OK, 0.5, 256, ncudnn.CUDNN_NON_DETERMINISTIC, ncudnn.CUDNN_FMA_MATH)
        assert p.reserved == [0, 0, 0]
        with pytest.raises(AttributeError):
            p.other = 1


def test_math_types_set_the_build_context(handle, monkeypatch):
    fma = lower.build_context(handle, ncudnn.CUDNN_FMA_MATH)
    assert not fma.allow_tensor_cores and not fma.allow_tf32
    dflt = lower.build_context(handle, ncudnn.CUDNN_DEFAULT_MATH)     # FP32 stays FP32-exact (not switched yet)
    assert dflt.allow_tensor_cores and not dflt.allow_tf32
    for mt in (ncudnn.CUDNN_TENSOR_OP_MATH, ncudnn.CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION):
        c = lower.build_context(handle, mt)
        assert c.allow_tensor_cores and c.allow_tf32
        monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
        c = lower.build_context(handle, mt)
        assert c.allow_tensor_cores and not c.allow_tf32
        monkeypatch.delenv("NVIDIA_TF32_OVERRIDE")


def _conv_setup(math=ncudnn.CUDNN_FMA_MATH):
    _, c = L.cudnnCreateConvolutionDescriptor()
    assert L.cudnnSetConvolution2dDescriptor(c, 1, 1, 1, 1, 1, 1, 1, 0) == (OK,)
    assert L.cudnnSetConvolutionMathType(c, math) == (OK,)
    return tdesc((1, 2, 4, 4)), fdesc((3, 2, 3, 3)), c, tdesc((1, 3, 4, 4))


def _check_rows(rows, count, enum, requested):
    assert count == len(rows) == min(requested, len(A.algos({FA: "fwd", DA: "dgrad", WA: "wgrad"}[enum])))
    assert len({int(r.algo) for r in rows}) == count
    seen_fail = False
    prev = -1.0
    for r in rows:
        assert isinstance(r.algo, enum)
        if r.status == OK:
            assert not seen_fail, "supported algorithms come first"
            assert r.time >= prev and r.memory >= 0
            prev = r.time
        else:
            seen_fail = True
            assert r.status == S.CUDNN_STATUS_NOT_SUPPORTED and r.time == -1.0 and r.memory == 0
        if "FFT" in r.algo.name:
            assert r.status == S.CUDNN_STATUS_NOT_SUPPORTED


def test_get_v7_every_direction(handle):
    x, w, c, y = _conv_setup()
    st, n, rows = L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, y, 8)
    assert st == OK
    _check_rows(rows, n, FA, 8)
    if not engines_for("conv_fprop"):
        assert all(r.status == S.CUDNN_STATUS_NOT_SUPPORTED for r in rows)
    st, n, rows = L.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, y, c, x, 3)
    assert st == OK
    _check_rows(rows, n, DA, 3)
    st, n, rows = L.cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, y, c, w, 10)
    assert st == OK
    _check_rows(rows, n, WA, 10)
    assert L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, y, 0)[0] == S.CUDNN_STATUS_BAD_PARAM
    assert L.cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, c, tdesc((1, 3, 5, 5)), 1)[0] == \
        S.CUDNN_STATUS_BAD_PARAM


def test_find_rows_and_ex_on_user_buffers(handle, rng):
    x, w, c, y = _conv_setup()
    st, n, rows = L.cudnnFindConvolutionForwardAlgorithm(handle, x, w, c, y, 8)
    assert st == OK
    _check_rows(rows, n, FA, 8)
    bx = dev(rng.standard_normal((1, 2, 4, 4)).astype(np.float32))
    bw = dev(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    by = dev(np.zeros((1, 3, 4, 4), np.float32))
    st, n, rows = L.cudnnFindConvolutionForwardAlgorithmEx(handle, x, bx, w, bw, c, y, by, 8, None, 0)
    assert st == OK
    _check_rows(rows, n, FA, 8)
    for r in rows:
        if r.status == OK:
            assert r.memory == 0  # no workspace given: only algorithms needing none are measured
    assert L.cudnnFindConvolutionForwardAlgorithmEx(handle, x, None, w, bw, c, y, by, 8, None, 0)[0] == \
        S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER


def test_fft_is_not_supported_with_a_reason(handle, rng):
    x, w, c, y = _conv_setup()
    for algo in (FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT, FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING):
        ret = L.cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, c, y, algo)
        assert ret == (S.CUDNN_STATUS_NOT_SUPPORTED, None)
        assert "FFT" in ncudnn.cudnnGetLastErrorString()
    st = L.cudnnConvolutionForward(handle, 1.0, x, dev(np.ones((1, 2, 4, 4), np.float32)), w,
                                   dev(np.ones((3, 2, 3, 3), np.float32)), c, FA.CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                                   None, 0, 0.0, y, dev(np.zeros((1, 3, 4, 4), np.float32)))
    assert st == (S.CUDNN_STATUS_NOT_SUPPORTED,) and "no FFT" in ncudnn.cudnnGetLastErrorString()
    fft = DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT
    assert L.cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, c, x, fft)[0] == S.CUDNN_STATUS_NOT_SUPPORTED
    assert L.cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, c, w, 9)[0] == S.CUDNN_STATUS_BAD_PARAM


def test_workspace_size_names_the_missing_engine(handle):
    x, w, c, y = _conv_setup()
    st, size = L.cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, c, y, 1)
    if engines_for("conv_fprop"):
        assert st == OK and size >= 0
    else:
        assert st == S.CUDNN_STATUS_NOT_SUPPORTED and "conv_fprop" in ncudnn.cudnnGetLastErrorString()
