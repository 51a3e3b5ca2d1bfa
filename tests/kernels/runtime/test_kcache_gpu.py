"""Kernel cache on a GPU: a cold process compiles and writes the cubin, a warm one loads it with
cuModuleLoadData and never builds the dispatcher."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

CHILD = r'''
import json, os, sys, time
import numpy as np
from numba import cuda
sys.path.insert(0, os.environ["HERE"])
from ncudnn.kernels.runtime import kcache
from test_kcache import make_scale_kernel
mode = sys.argv[1]

def build():
    if mode == "warm":
        raise SystemExit("build_dispatcher_fn called on a warm start")
    return make_scale_kernel(np.float32(2.5))

t = time.perf_counter()
k = kcache.get_or_compile("gpu-test/scale", build, "void(float32[::1], float32[::1], float32)")
seconds = time.perf_counter() - t
x = np.random.default_rng().uniform(-1, 1, 300).astype(np.float32)
out = cuda.to_device(np.full(300, np.nan, np.float32))
dx = cuda.to_device(x)
k.prepare(3, 128, (dx, out, np.float32(3))).run()
got = out.copy_to_host()
want = x * np.float32(3) + np.float32(2.5)  # the GPU fuses it (one rounding): compare with an atol
print("R " + json.dumps(dict(stats=kcache.stats(), seconds=seconds, from_cubin=k.module is not None,
                             attrs=k.attrs, ok=bool(np.allclose(got, want, rtol=1e-6, atol=1e-6)),
                             got=[float(v) for v in got[:4]], want=[float(v) for v in want[:4]])))
'''


def _child(mode, cache_dir):
    env = dict(os.environ, NCUDNN_CACHE_DIR=str(cache_dir), HERE=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, env=env,
                       timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("R ")]
    assert line, p.stderr[-3000:] + p.stdout[-2000:]
    return json.loads(line[0][2:])


def test_warm_start_from_cubin(tmp_path):
    cold = _child("cold", tmp_path)
    assert cold["ok"] and cold["stats"]["misses"] == 1 and cold["stats"]["writes"] == 1, cold
    assert not cold["from_cubin"]
    files = [f for d in os.listdir(tmp_path) for f in os.listdir(tmp_path / d)]
    assert len(files) == 1 and files[0].endswith(".kc")
    warm = _child("warm", tmp_path)
    assert warm["ok"] and warm["from_cubin"], warm
    assert warm["stats"]["disk_hits"] == 1 and warm["stats"]["misses"] == 0
    assert warm["attrs"]["regs"] == cold["attrs"]["regs"] and warm["attrs"]["regs"] > 0
    print(f"get_or_compile: cold {cold['seconds']:.3f} s, warm {warm['seconds']:.3f} s")
