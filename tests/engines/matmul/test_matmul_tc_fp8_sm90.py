"""The FP8 kernels engine matmul_tc builds (its tiles, FP8 in, FP8 / BF16 out, by-value scales),
compiled for sm_90 without a GPU: the PTX carries the m16n8k32 FP8 mma, the cubin links with no spills
and no local memory, at most 255 registers. Slow (numba + ptxas take ~20-40 s a kernel)."""
import os

import pytest

from ncudnn.kernels.runtime import kcache

HERE = os.path.dirname(os.path.abspath(__file__))
#: (tile index, fp8 kind, output) compiled: the two largest tiles matmul_tc offers FP8 (FP8_SPILLS left out)
#: ("fp8ds": FP8 output, descale_a / descale_b as device tensors read by the kernel)
CASES = [(3, "e4m3", "fp8"), (4, "e5m2", "fp8"), (3, "e4m3", "bf16"), (4, "e4m3", "bf16"), (3, "e4m3", "fp8ds")]


def _engine_kernel(tile, kind, out):
    """(kernel, argument types) of matmul_tc's plan for a 1024^3 FP8 graph at TILE_SIZE ``tile``."""
    from dataclasses import replace

    from ncudnn.engines import api, registry
    from ncudnn.engines.gemm import common as gc
    from ncudnn.engines.matmul.tc import TILES
    from ncudnn.types import cudnnBackendKnobType_t as K, cudnnDataType_t as DT
    from test_matmul_tc_fp8 import fp8_graph

    in_dt = {"e4m3": DT.CUDNN_DATA_FP8_E4M3, "e5m2": DT.CUDNN_DATA_FP8_E5M2}[kind]
    out_dt = in_dt if out.startswith("fp8") else DT.CUDNN_DATA_BFLOAT16
    g, _ = fp8_graph(1, 1024, 1024, 1024, in_dt, out_dt, device_scales=2 if out == "fp8ds" else 0)
    eng = registry.by_name("matmul_tc")
    sub = api.problem(g)
    cx = replace(api.context(), allow_tensor_cores=True)
    assert eng.check_support(sub, cx)[0] == 0
    cfg = eng.default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_TILE_SIZE, tile) \
        .with_knob(K.CUDNN_KNOB_TYPE_STAGES, TILES[tile].stages)
    kern, typing, _ = eng.kernel(sub, cfg)
    return kern, gc.argtypes(typing)


def sm90_kernel(tile, kind, out):
    return _engine_kernel(tile, kind, out)[0].kernel


def _sig_ref(tile, kind, out):
    return f"test_matmul_tc_fp8_sm90:SIGS.{tile}_{kind}_{out}"


class _Sigs:
    """Signature callables by attribute name "<tile>_<kind>_<out>" (what resource_usage_subprocess refers to)."""

    def __getattr__(self, name):
        tile, kind, out = name.split("_")
        return lambda _kernel: _engine_kernel(int(tile), kind, out)[1]


SIGS = _Sigs()


@pytest.mark.slow
@pytest.mark.parametrize("tile,kind,out", CASES, ids=lambda v: str(v))
def test_fp8_engine_kernels_compile_for_sm90(monkeypatch, tile, kind, out):
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = kcache.resource_usage_subprocess("test_matmul_tc_fp8_sm90:sm90_kernel", _sig_ref(tile, kind, out),
                                         args=(tile, kind, out), cc=(9, 0), timeout=900)
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert not r["local"] and not r["stack_frame"], r
    assert r["registers"] <= 255, r


def ptx_of(tile, kind, out):
    """The kernel's PTX for sm_90 (run with the simulator off)."""
    from numba import cuda

    kern, types = _engine_kernel(tile, kind, out)
    ptx, _ = cuda.compile_ptx(kern.kernel.py_func, types, cc=(9, 0))
    return ptx


@pytest.mark.slow
def test_fp8_engine_kernel_ptx_has_the_fp8_mma(monkeypatch):
    import json
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import json, test_matmul_tc_fp8_sm90 as t; p = t.ptx_of(3, 'e4m3', 'fp8'); "
            "print('PTX ' + json.dumps([p.count('mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32'), "
            "p.count('.local'), p.count('ldmatrix'), p.count('cp.async.cg')]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    line = [x for x in r.stdout.splitlines() if x.startswith("PTX ")]
    assert line, r.stderr[-3000:]
    n_mma, n_local, n_ldm, n_cp = json.loads(line[0][4:])
    assert n_mma >= 32 and n_local == 0 and n_ldm > 0 and n_cp > 0, (n_mma, n_local, n_ldm, n_cp)
