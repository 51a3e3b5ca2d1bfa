"""Slices and the in-place VIEW_ONLY reshape on the data_movement engine on a real GPU at >= 64 MB:
each case is checked exactly against NumPy on poisoned outputs, then timed (CUDA events around 20
back-to-back executions after 3 warm-ups; GB/s = (bytes of Y read from X + bytes of Y written) / time,
the in-place case counts X once read and Y once written), printed beside torch doing the same copy
in the same process (``x[slices].contiguous()``; for the in-place case ``x.t().contiguous()``, which
is not in place), and, for a copy built with 16-byte accesses, its 8-byte twin launched alone on
the same buffers. Target: >= 80% of the H200's measured copy bandwidth (4.21 TB/s) for the slices
whose runs are whole 16-byte pieces, the in-place staged transpose about half of a plain transpose
(two copies, the figure counts one read and one write)."""
import numpy as np
import pytest
from numba import cuda

from ncudnn import memory
from ncudnn.engines import api
from ncudnn.engines.datamove.engine import _copy_step
from ncudnn.ir import OpGraph, Reshape, Slice
from ncudnn.types import cudnnBackendReshapeMode_t as RM, cudnnDataType_t as DT

import membound_util as U

pytestmark = pytest.mark.gpu

COPY_BW = 4.21e12
F32, F16, BF16 = DT.CUDNN_DATA_FLOAT, DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16
NHWC4 = (0, 2, 3, 1)
N_IN_PLACE = 8192


def _strides(dims, order):
    st, s = [0] * len(dims), 1
    for d in reversed(order):
        st[d] = s
        s *= dims[d]
    return tuple(st)


#: name -> (X dims, X stride order or None, dtype, slices)
CASES = {
    "rows_f32_8192x8192[1024:7168]": ((8192, 8192), None, F32, (slice(1024, 7168), slice(None))),
    "cols_f32_8192x8192[:,1024:7168]": ((8192, 8192), None, F32, (slice(None), slice(1024, 7168))),
    "odd_cols_f32_8192x8192[:,1:8191]": ((8192, 8192), None, F32, (slice(None), slice(1, 8191))),
    "every_2nd_col_f32_8192x8192": ((8192, 8192), None, F32, (slice(None), slice(0, 8192, 2))),
    "nchw_channels_f16_64x256x64x64[:,64:192]": ((64, 256, 64, 64), None, F16, (slice(None), slice(64, 192))),
    "nhwc_channels_bf16_64x256x64x64[:,32:224]": ((64, 256, 64, 64), NHWC4, BF16, (slice(None), slice(32, 224))),
    "nchw_spatial_crop_f32_64x128x66x66": ((64, 128, 66, 66), None, F32,
                                           (slice(None), slice(None), slice(1, 65), slice(1, 65))),
}


def _slice_graph(xd, order, dtype, sls):
    sls = list(sls) + [slice(None)] * (len(xd) - len(sls))
    r = [s.indices(n) for s, n in zip(sls, xd)]
    x = U.t(1, xd, dtype, _strides(xd, order) if order else None, name="x")
    y = U.t(2, [1] * len(xd), dtype, name="y")
    y.dims = y.strides = None
    node = Slice("sl", {"X": x}, {"Y": y}, start_indices=[a for a, _, _ in r], limit_indices=[b for _, b, _ in r],
                 strides=[k for _, _, k in r])
    return OpGraph([node]).finalize(), x, y, tuple(slice(*t) for t in r)


def _time(fn, reps=20):
    for _ in range(3):
        fn()
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / 1e3 / reps


def _torch_time(host, dtype, order, fn):
    """Seconds torch takes for ``fn(x)`` on ``host`` (logical dims) in ``dtype`` / layout; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    tdt = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}[dtype]
    x = torch.from_numpy(np.ascontiguousarray(host)).cuda().to(tdt)
    if order == NHWC4:
        x = x.contiguous(memory_format=torch.channels_last)
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn(x)
    ev0.record()
    for _ in range(20):
        fn(x)
    ev1.record()
    ev1.synchronize()
    return ev0.elapsed_time(ev1) / 1e3 / 20


def _report(name, sec, nbytes, tsec):
    bw = nbytes / sec
    line = f"{name}: ncudnn {sec * 1e3:.4f} ms {bw / 1e9:.0f} GB/s ({bw / COPY_BW:.1%} of 4.21 TB/s)"
    if tsec is not None:
        line += f" | torch {tsec * 1e3:.4f} ms {nbytes / tsec / 1e9:.0f} GB/s | ncudnn/torch time {sec / tsec:.2f}x"
    print(line)


@pytest.mark.parametrize("name", list(CASES))
def test_slc_bandwidth(rng, name):
    xd, order, dtype, sls = CASES[name]
    g, x, y, full = _slice_graph(xd, order, dtype, sls)
    host = rng.standard_normal(xd, dtype=np.float32)
    xb, out = U.upload(host, x), U.poisoned(y)
    plan = api.build_plan(g, api.get_heuristics(g)[0])
    assert plan.engine_names == ["data_movement"] and plan.workspace_size == 0
    pack = {x.uid: xb, y.uid: out}
    api.execute(plan, pack)
    cuda.synchronize()
    np.testing.assert_array_equal(U.download(out, y), U.cast(host, dtype)[full])
    sec = _time(lambda: api.execute(plan, pack))
    nbytes = 2 * int(np.prod(y.dims)) * y.itemsize
    tsec = _torch_time(host, dtype, order, lambda t: _contiguous(t[full], order))
    _report(name, sec, nbytes, tsec)
    sp = plan.parts[0]
    (step, _), = sp.selected({x.uid: _view(xb), y.uid: _view(out)}, None)
    print(f"    kernel: {'16-byte' if step.vec16 else 'narrow'} {sp.steps[0].key.split(':')[1]}, "
          f"grid {step.grid} block {step.block}")
    if step.vec16:
        out2 = U.poisoned(y)
        views = {x.uid: _view(xb), y.uid: _view(out2)}
        twin = _copy_step(*step.copy, vec=False)
        launch = twin.compile().prepare(twin.grid, twin.block, tuple(a.bind(views, None) for a in twin.args),
                                        twin.shared)
        launch.run(None, 0)
        cuda.synchronize()
        np.testing.assert_array_equal(U.download(out2, y), U.cast(host, dtype)[full])
        _report(name + " 8-byte twin", _time(lambda: launch.run(None, 0)), nbytes, None)


def _view(buf):
    """A DeviceView of a test buffer (bf16 travels as uint16 bits: viewed as fp16, only the address is used)."""
    return memory.as_view(buf.view(np.float16) if buf.dtype == np.uint16 else buf)


def _contiguous(t, order):
    import torch
    return t.contiguous(memory_format=torch.channels_last) if order == NHWC4 else t.contiguous()


def test_slc_in_place_view_only_transpose(rng):
    """VIEW_ONLY reshape of an 8192 x 8192 f32 onto its own buffer, transposed: staged (2 copies)."""
    n = N_IN_PLACE
    x = U.t(1, (n, n), F32, name="x")
    y = U.t(2, (n, n), F32, (1, n), name="y")
    g = OpGraph([Reshape("rs", {"X": x}, {"Y": y}, mode=RM.CUDNN_RESHAPE_VIEW_ONLY)]).finalize()
    plan = api.build_plan(g, api.get_heuristics(g)[0])
    assert plan.workspace_size >= n * n * 4
    ws = cuda.device_array(plan.workspace_size, np.uint8)
    host = rng.standard_normal((n, n), dtype=np.float32)
    buf = U.upload(host, x)
    api.execute(plan, {x.uid: buf, y.uid: buf}, ws)
    cuda.synchronize()
    np.testing.assert_array_equal(U.download(buf, y), host.astype(np.float64))
    sec = _time(lambda: api.execute(plan, {x.uid: buf, y.uid: buf}, ws))
    tsec = _torch_time(host, F32, None, lambda t: t.t().contiguous())
    _report("in_place_view_only_transpose_f32_8192x8192 (staged)", sec, 2 * n * n * 4, tsec)
