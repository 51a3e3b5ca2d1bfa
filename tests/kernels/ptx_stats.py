"""Run a compile-and-inspect script in a fresh NUMBA_ENABLE_CUDASIM=0 process (NVVM + nvJitLink need no GPU) and
return the JSON it prints on its ``STATS `` line: the scaffolding of the sm_90a compile tests of the wgmma
GEMM (test_wgmma_compile, test_wgmma_tf32_compile, test_wgmma_vec_epilogue_compile)."""
import json
import os
import subprocess
import sys


def ptx_stats(script, spec, timeout=1500):
    """``script`` run as ``python -c script spec``; its ``STATS {json}`` line parsed (stderr in the failure)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", script, spec], env=env, capture_output=True, text=True,
                         timeout=timeout)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("STATS ")]
    assert line, out.stderr[-3000:]
    return json.loads(line[0][6:])
