"""kernels/runtime/launch.py and kernels/runtime/kcache.py split by responsibility (launch_args: views / ABI / types;
launch_sim: the simulator's prepared launch; cubin: offline compile and resource reading): every public
name is still importable from the old module and is the same object; and no module of the package is over the
600-line budget (the generated types.py excepted)."""
import pathlib

import numpy as np
from numba import cuda

import ncudnn
from ncudnn.kernels.runtime import cubin, kcache, launch, launch_args, launch_sim


def test_dup_old_modules_keep_their_public_names():
    for name in launch_args.__all__:
        assert getattr(launch, name) is getattr(launch_args, name), name
    for name in launch.__all__:
        assert hasattr(launch, name), name
    for name in cubin.__all__:
        assert getattr(kcache, name) is getattr(cubin, name), name
    for name in kcache.__all__:
        assert hasattr(kcache, name), name
    assert set(cubin.__all__) <= set(kcache.__all__) and set(launch_args.__all__) <= set(launch.__all__)


#: the package line budget (issue #22): no module over this many lines but the generated types.py
MAX_LINES = 600


def test_no_package_module_over_the_line_budget():
    pkg = pathlib.Path(ncudnn.__file__).parent
    over = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel == "types.py":
            continue
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            over[rel] = n
    assert not over, f"modules over {MAX_LINES} lines (split them along a seam): {over}"


def test_dup_prepared_launch_runs_through_the_split(rng):
    @cuda.jit
    def axpy(x, y, a):
        i = cuda.grid(1)
        if i < x.shape[0]:
            y[i] = a * x[i] + y[i]

    x = rng.uniform(-1, 1, 37).astype(np.float32)
    y0 = rng.uniform(-1, 1, 37).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y0)
    k = launch.CompiledKernel(axpy, "void(float32[::1], float32[::1], float32)")
    p = k.prepare(2, 32, (dx, dy, np.float32(0.5)))
    assert isinstance(p, launch_sim.SimPreparedLaunch if launch.SIM else launch.PreparedLaunch)
    p.run()
    np.testing.assert_allclose(dy.copy_to_host(), 0.5 * x.astype(np.float64) + y0, rtol=1e-6)
