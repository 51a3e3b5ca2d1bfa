"""Split-K tensor-core conv fprop (kernels/tc_conv/splitk.py): the partial kernel over grid y slices plus
the ordered reduce with the fused epilogue, against the float64 oracle at tiny NHWC shapes in the
simulator (mainloops v1 / v3 / v4, split counts that do not divide the k tiles, an empty slice); the
split kernels compile for sm_90 without spills (slow)."""
import ml_dtypes
import numpy as np
import pytest

from ncudnn.kernels.pointwise import epilogue as ep
from ncudnn.kernels.tc_conv import conv_grid, make_tc_conv_fprop
from ncudnn.kernels.tc_conv.splitk import (make_split_reduce, make_split_reduce_vec, partial_args, reduce_args,
                                           reduce_launch, vec_args, vec_launch, workspace_bytes)
from ncudnn.kernels.tc_gemm import TcGemmConfig
from ncudnn.kernels.tc_gemm.launch import _compiled
from ncudnn.kernels.runtime.launch import CompiledKernel
from ncudnn.reference.conv import conv_fprop
from ncudnn.testing import SIM, assert_close, poison_value, rel_err

_NP = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}


def _dev(x):
    if SIM:
        return x
    from numba import cuda
    return cuda.to_device(x)


def _store(x):
    return x.view(np.uint16) if x.dtype == ml_dtypes.bfloat16 else x


def _run(rng, cfg, N, C, H, W, K, R, S, pad, out_dtype="bfloat16", relu=True, vec=False):
    dtype = "bfloat16"
    x = rng.standard_normal((N, C, H, W)).astype(_NP[dtype])
    w = (rng.standard_normal((K, C, R, S)) / np.sqrt(C * R * S)).astype(_NP[dtype])
    bias = rng.standard_normal(K).astype(_NP[out_dtype])
    P, Q = H + 2 * pad - R + 1, W + 2 * pad - S + 1
    M = N * P * Q
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    w_krsc = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    y = np.full(M * K, poison_value(np.dtype(_NP[out_dtype])), _NP[out_dtype])
    ws = np.full(workspace_bytes(M, K, cfg.SPLIT_K) // 4, np.float32(np.nan), np.float32)
    steps = (ep.bias("col"), ep.relu()) if relu else (ep.bias("col"),)
    spec = ep.EpilogueSpec(steps, out_dtype)
    kern = make_tc_conv_fprop(cfg, dtype, spec, out_dtype, out_dtype)
    red = make_split_reduce(spec, out_dtype, out_dtype, cfg.SPLIT_K)
    xd, wd, yd, bd, wsd = (_dev(_store(v).reshape(-1)) for v in (x_nhwc, w_krsc, y, bias, ws))
    args = partial_args(kern, xd, wd, wsd, N, C, H, W, K, P, Q, R, S, (1, 1), (pad, pad), (1, 1),
                        (H * W * C, W * C, C), R * S * C)
    _compiled(kern).launch(conv_grid(kern, N, P, Q, K, cfg.SPLIT_K), (cfg.threads, 1, 1), args, 0, kern.smem)
    if vec:
        grid, block = vec_launch(M, K)
        CompiledKernel(make_split_reduce_vec(spec, out_dtype, out_dtype)).launch(
            grid, block, vec_args(wsd, cfg.SPLIT_K, yd, bd, yd, M, K, K, 1), 0, 0)
    else:
        grid, threads = reduce_launch(cfg.SPLIT_K, M, K)
        CompiledKernel(red).launch((grid, 1, 1), (threads, 1, 1), reduce_args(wsd, cfg.SPLIT_K, yd, bd, yd, M, K, K, 1),
                                   0, 0)
    out = _store(y) if SIM else yd.copy_to_host()
    got = out.view(_NP[out_dtype]).reshape(N, P, Q, K).transpose(0, 3, 1, 2).astype(np.float64)
    ref = conv_fprop(x.astype(np.float64), w.astype(np.float64), stride=(1, 1), pre_pad=(pad, pad),
                     post_pad=(pad, pad), dilation=(1, 1)) + bias.astype(np.float64)[None, :, None, None]
    return got, np.maximum(ref, 0) if relu else ref


@pytest.mark.parametrize("version,split,C", [
    (4, 2, 32),     # v4 one-tap gather: 9 k tiles in slices of 5 + 4
    (4, 4, 32),     # 9 k tiles, 4 slices of 3: the last slice is empty (zero partials)
    (3, 3, 8),      # v3, C < BLOCK_K: several taps per k tile, K = 72 -> 3 k tiles, one a slice
    (1, 2, 24),     # v1 running gather from a mid-tap start (K = 216: 7 k tiles, slices 4 + 3, ragged last tile)
], ids=["v4_k2", "v4_k4_empty", "v3_k3_c8", "v1_k2_c24"])
def test_tsk_conv_split_bias_relu(rng, version, split, C):
    cfg = TcGemmConfig(32, 32, 32, 2, 2, 2, 1, VERSION=version, SPLIT_K=split)
    got, ref = _run(rng, cfg, 1, C, 4, 4, 32, 3, 3, 1)
    assert rel_err(got, ref) < 1e-2
    assert_close(got, ref, "bfloat16")


@pytest.mark.parametrize("out_dtype,relu", [("bfloat16", True), ("float32", False)])
def test_tsk_conv_split_vec_reduce(rng, out_dtype, relu):
    """The vector reduce: M = 15 (a partial row block), N = 32 (a partial column block), 3 slices."""
    cfg = TcGemmConfig(32, 32, 32, 2, 2, 2, 1, VERSION=4, SPLIT_K=3)
    got, ref = _run(rng, cfg, 1, 32, 5, 3, 32, 3, 3, 1, out_dtype=out_dtype, relu=relu, vec=True)
    assert rel_err(got, ref) < 1e-2
    assert_close(got, ref, "bfloat16")


def test_tsk_conv_split_f32_out_no_relu(rng):
    cfg = TcGemmConfig(32, 32, 32, 2, 2, 2, 1, VERSION=4, SPLIT_K=3)
    got, ref = _run(rng, cfg, 1, 32, 3, 4, 16, 3, 3, 1, out_dtype="float32", relu=False)
    assert (got < 0).any()
    assert_close(got, ref, "bfloat16")


def test_tsk_split_name_and_check():
    from ncudnn.kernels.tc_gemm import check
    c = TcGemmConfig(128, 64, 32, 2, 2, 4, 8, VERSION=4, SPLIT_K=3)
    assert c.name.endswith("_v4_k3") and "_k" not in c.replace(SPLIT_K=1).name
    assert not check(c.replace(SPLIT_K=0))[0]
    spec = ep.EpilogueSpec((ep.bias("col"),), "bfloat16")
    k3 = make_tc_conv_fprop(c, "bfloat16", spec, "bfloat16", "bfloat16")
    assert k3 is make_tc_conv_fprop(c.replace(SPLIT_K=5), "bfloat16", spec, "bfloat16", "bfloat16")
    assert k3.cfg.SPLIT_K == 2 and k3.out_dtype == "float32"
    with pytest.raises(ValueError, match="k slices"):
        conv_grid(k3, 1, 4, 4, 64, 1)
    with pytest.raises(ValueError, match="conv kernel only"):
        from ncudnn.kernels.tc_gemm import make_tc_gemm
        make_tc_gemm(c, True, True, "bfloat16", epi=ep.EpilogueSpec((), "bfloat16"))


@pytest.mark.slow
def test_tsk_sm90_no_spills():
    """The registered split-K conv cases (kernels/tc_conv/split_cases.py) link for sm_90: no spills, no stack."""
    from ncudnn.kernels.runtime import compile_check
    from ncudnn.kernels.tc_conv.split_cases import TC_CONV_SPLIT_CASES
    names = [c[0] for c in TC_CONV_SPLIT_CASES] + ["tc_conv_splitk_reduce_vec_bf16_bias_relu"]
    assert set(names) <= set(compile_check.registered_cases())
    results = compile_check.run_compile_check(names, timeout=3000, jobs=2)
    print("\n".join(r.summary() for r in results))
    failed = [r.summary() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.cubin_info and r.spill_stores == 0 and r.stack_frame == 0 for r in results)
