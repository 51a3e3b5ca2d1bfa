"""Every ptx intrinsic compiles for sm_90 to the PTX instruction it names, with no local memory and
no spills in the nvJitLink cubin. Numba cannot compile in the simulator, so the probe kernel is
compiled by this file run as a script with NUMBA_ENABLE_CUDASIM=0."""
import json
import os
import subprocess
import sys

import pytest
from numba import cuda, float32, uint16

from ncudnn.kernels.primitives import ptx

_MARK = "PTX_PROBE_JSON "

EXPECTED = [
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
    "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
    "cp.async.ca.shared.global [%r{}], [%rd{}], 4;",
    "cp.async.ca.shared.global [%r{}], [%rd{}], 8;",
    "cp.async.ca.shared.global [%r{}], [%rd{}], 16;",
    "cp.async.cg.shared.global [%r{}], [%rd{}], 16;",
    "cp.async.cg.shared.global [%r{}], [%rd{}], 16, %r{};",
    "cp.async.commit_group;",
    "cp.async.wait_group 3;",
    "cp.async.wait_all;",
    "cvta.to.shared.u64",
    "cvt.rn.bf16x2.f32",
    "cvt.rn.f16x2.f32",
    "cvt.rna.tf32.f32",
    "cvt.rn.satfinite.e4m3x2.f32",
    "cvt.rn.satfinite.e5m2x2.f32",
    "cvt.f32.f16",
]


def _probe(fa, fb, src, out):
    sm = cuda.shared.array(1024, uint16)
    lane = cuda.laneid
    ptx.cp_async_ca_4(sm, lane * 2, src, lane * 2)
    ptx.cp_async_ca_8(sm, 128 + lane * 4, src, lane * 4)
    ptx.cp_async_ca_16(sm, 256 + lane * 8, src, lane * 8)
    ptx.cp_async_cg_16(sm, 512 + lane * 8, src, lane * 8)
    ptx.cp_async_commit()
    ptx.cp_async_cg_16_zfill(sm, 768 + lane * 8, src, lane * 8, lane % 17)
    ptx.cp_async_commit()
    ptx.cp_async_wait_group(3)
    ptx.cp_async_wait_all()
    cuda.syncthreads()
    off = (lane % 16) * 8
    a0, a1, a2, a3 = ptx.ldmatrix_x4(sm, off)
    t0, t1, t2, t3 = ptx.ldmatrix_x4_trans(sm, 256 + off)
    b0, b1 = ptx.ldmatrix_x2(sm, 512 + off)
    u0, u1 = ptx.ldmatrix_x2_trans(sm, 768 + off)
    s = ptx.ldmatrix_x1(sm, off) ^ ptx.ldmatrix_x1_trans(sm, off)
    z = float32(0.0)
    d0, d1, d2, d3 = ptx.mma_m16n8k16_bf16(a0, a1, a2, a3, b0, b1, z, z, z, z)
    d0, d1, d2, d3 = ptx.mma_m16n8k16_f16(t0, t1, t2, t3, u0, u1, d0, d1, d2, d3)
    x = fa[lane]
    d0, d1, d2, d3 = ptx.mma_m16n8k8_tf32(ptx.f32_to_tf32(x), a1, a2, a3, s, b1, d0, d1, d2, d3)
    e = ptx.pack_e4m3x4(d0, d1, d2, d3)
    d0, d1, d2, d3 = ptx.mma_m16n8k32_e4m3(e, a1, a2, a3, b0, b1, d0, d1, d2, d3)
    f = ptx.pack_e5m2x4(d0, d1, d2, d3)
    d0, d1, d2, d3 = ptx.mma_m16n8k32_e5m2(f, a1, a2, a3, b0, b1, d0, d1, d2, d3)
    p, q = ptx.unpack_bf16x2(ptx.pack_bf16x2(d0, d1))
    v, w = ptx.unpack_f16x2(ptx.pack_f16x2(d2, d3))
    out[lane] = p + q + v + w + fb[lane] + float32(ptx.cvta_shared(sm, lane))


def _main():
    from ncudnn.kernels.runtime.compile_check import link_info_log, parse_ptxas_log, ptx_local_bytes
    ptx_text = cuda.compile_ptx(_probe, "void(float32[::1], float32[::1], uint16[::1], float32[::1])",
                                cc=(9, 0))[0]
    funcs = parse_ptxas_log(link_info_log(ptx_text, (9, 0)))
    print(_MARK + json.dumps({"ptx": ptx_text, "local": ptx_local_bytes(ptx_text), "funcs": funcs}))


@pytest.fixture(scope="module")
def probe():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0",
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, capture_output=True,
                         text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    raise AssertionError(f"probe compile failed (rc {out.returncode}):\n{out.stderr[-4000:]}")


@pytest.mark.parametrize("text", EXPECTED)
def test_probe_ptx_has_instruction(probe, text):
    import re
    pattern = re.escape(text).replace(r"\{\}", r"\d+")
    assert re.search(pattern, probe["ptx"]), f"{text!r} not in the sm_90 PTX"


def test_probe_has_no_local_memory_or_spills(probe):
    assert probe["ptx"].count(".target sm_90") == 1
    assert probe["local"] == 0, "PTX declares .local memory"
    assert ".local" not in probe["ptx"]
    assert probe["funcs"], "no ptxas resource info from nvJitLink"
    for name, f in probe["funcs"].items():
        assert f.get("spill_stores", 0) == 0 and f.get("spill_loads", 0) == 0, (name, f)
        assert f.get("stack_frame", 0) == 0, (name, f)


if __name__ == "__main__":
    _main()
