"""The parameter packing of ncudnn.kernels.runtime.launch against numba's own kernel ABI, without a GPU.

* In this process: the packed buffer read back through the pointer array is the flattened values.
* In a child process with the simulator off: numba-cuda's ``_Kernel._prepare_args`` flattens the same
  arguments (array descriptions handed in through an ArgHint, so no device memory is needed) and
  must give byte-identical parameters; the PTX that numba compiles for sm_90 must declare exactly
  as many ``.param`` entries, of the same widths.
"""
import ctypes
import json
import os
import struct
import subprocess
import sys

import numpy as np

from ncudnn.kernels.runtime.launch import ArgView, flatten_args, pack_params
from numba.cuda import types


def test_pack_params_readback(rng):
    ptr = int(rng.integers(1 << 20, 1 << 40)) * 256
    v = ArgView(ptr, (3, 5), (40, 8), 8, np.dtype(np.float64))
    i32, f32 = int(rng.integers(-1000, 1000)), float(np.float32(rng.standard_normal()))
    argtypes = (types.Array(types.float64, 2, "A"), types.int32, types.float32, types.boolean,
                types.float16, types.complex64)
    args = (v, i32, f32, True, 1.5, complex(2.0, -3.0))
    params, ptrs = flatten_args(argtypes, args)
    assert [p[0] for p in ptrs] == [4]
    want = [0, 0, 15, 8, ptr, 3, 5, 40, 8]
    assert [val for _, val in params[:9]] == want
    vals, argv = pack_params(params)
    got = []
    for i, (fmt, _) in enumerate(params):
        size = struct.calcsize("<" + fmt)
        got.append(struct.unpack("<" + fmt, ctypes.string_at(argv[i], size))[0])
    assert got[:9] == want
    assert got[9] == i32 and got[10] == f32 and got[11] is True
    assert got[12] == int(np.float16(1.5).view(np.uint16))
    assert got[13:] == [2.0, -3.0]


CHILD = r'''
import ctypes, json, os, struct, sys, types as pytypes
import numpy as np
req = json.loads(sys.stdin.read())
from numba.cuda import types, compile_ptx
from numba.cuda.args import ArgHint
from numba.cuda.dispatcher import _Kernel
from numba.cuda.np import numpy_support
from ncudnn.kernels.runtime.launch import ArgView, flatten_args

rng = np.random.default_rng(req["seed"])
REC = numpy_support.from_dtype(np.dtype([("a", np.float32), ("b", np.int64)], align=True))

class Layout:
    def __init__(self, v):
        self.strides_in_bytes = v.strides
        self.is_contiguous_c = self.is_contiguous_f = False

class Dev:  # what numba's wrap_arg(...).to_device() returns, described on the CPU
    def __init__(self, v):
        self.ptr, self.shape, self._layout = v.ptr, v.shape, Layout(v)
        self.size = int(np.prod(v.shape))
        self.dtype = np.dtype(v.dtype)

class Hint(ArgHint):
    def __init__(self, dev):
        self.dev = dev
    def to_device(self, retr, stream=0):
        return self.dev

def view(dtype, shape):
    it = np.dtype(dtype).itemsize
    strides = tuple(int(s) * it for s in rng.integers(1, 50, len(shape)))
    return ArgView(int(rng.integers(1, 1 << 36)) * 256, shape, strides, it, np.dtype(dtype))

args, tys = [], []
def add(t, v):
    tys.append(t); args.append(v)
add(types.Array(types.float32, 1, "A"), view(np.float32, (7,)))
add(types.Array(types.float64, 3, "A"), view(np.float64, (2, 3, 4)))
add(types.Array(types.int8, 2, "A"), view(np.int8, (5, 6)))
for t in (types.int8, types.uint8, types.int16, types.uint16, types.int32, types.uint32):
    add(t, int(rng.integers(0, 100)))
add(types.int64, int(rng.integers(-(1 << 40), 1 << 40)))
add(types.uint64, int(rng.integers(0, 1 << 62)))
add(types.boolean, bool(rng.integers(0, 2)))
add(types.float16, float(np.float16(rng.standard_normal())))
add(types.float32, float(np.float32(rng.standard_normal())))
add(types.float64, float(rng.standard_normal()))
add(types.complex64, complex(np.complex64(complex(*rng.standard_normal(2)))))
add(types.complex128, complex(*rng.standard_normal(2)))
add(REC, int(rng.integers(1, 1 << 36)) * 256)
add(types.UniTuple(types.int64, 3), tuple(int(x) for x in rng.integers(0, 99, 3)))
add(types.Tuple((types.Array(types.float32, 2, "A"), types.int32)), (view(np.float32, (3, 2)), 5))
add(types.CPointer(types.float32), int(rng.integers(1, 1 << 36)) * 256)

def wrap(t, v):  # numba receives array descriptions and records through ArgHints
    if isinstance(t, types.Array):
        return Hint(Dev(v))
    if isinstance(t, types.Record):
        return Hint(pytypes.SimpleNamespace(ptr=v))
    if isinstance(t, types.BaseTuple):
        return tuple(wrap(tt, vv) for tt, vv in zip(t, v))
    return v

fake = pytypes.SimpleNamespace(extensions=[])
fake._prepare_args = lambda ty, val, stream, retr, out: _Kernel._prepare_args(
    fake, ty, val, stream, retr, out)
numba_args = []
for t, v in zip(tys, args):
    fake._prepare_args(t, wrap(t, v), 0, [], numba_args)

def as_bytes(x):  # how cuda.core packs what _prepare_args produces
    if isinstance(x, bool):
        return struct.pack("<?", x)
    if isinstance(x, int):
        return struct.pack("<q", x)
    return bytes(x)

ours, _ = flatten_args(tuple(tys), tuple(args))
numba_bytes = [as_bytes(x).hex() for x in numba_args]
our_bytes = [struct.pack("<" + f, v).hex() for f, v in ours]

names = ", ".join(f"p{i}" for i in range(len(tys)))
ns = {}
exec(f"def kernel({names}):\n    pass\n", ns)
ptx, _ = compile_ptx(ns["kernel"], tuple(tys), cc=(9, 0))
widths = [int(w) // 8 for w in __import__("re").findall(r"\.param \.[a-z]+?(\d+) ", ptx)]
print("ABI " + json.dumps(dict(numba=numba_bytes, ours=our_bytes, ptx=widths,
                               sizes=[struct.calcsize("<" + f) for f, _ in ours])))
'''


def test_flattening_matches_numba_and_ptx(rng):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    p = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps({"seed": int(rng.integers(1 << 31))}),
                       capture_output=True, text=True, env=env, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("ABI ")]
    assert line, p.stderr[-3000:]
    r = json.loads(line[0][4:])
    assert r["ours"] == r["numba"]
    assert r["ptx"] == r["sizes"]
    assert len(r["ptx"]) > 40  # arrays of ndim 1, 3, 2 (+ tuple ndim 2) alone give 41 slots


GPU_PATH_CHILD = r'''
import ctypes, json, struct, sys
import numpy as np
from cuda.bindings import driver as drv
import ncudnn.kernels.runtime.launch as L

req = json.loads(sys.stdin.read())
calls, attrs = [], []
class FakeDrv:  # the driver entry points the GPU path uses, recorded instead of called
    CUfunction_attribute = drv.CUfunction_attribute
    CUresult = drv.CUresult
    @staticmethod
    def cuFuncSetAttribute(fn, attr, value):
        attrs.append([int(fn), int(attr), value])
        return (drv.CUresult.CUDA_SUCCESS,)
    @staticmethod
    def cuGetErrorName(err):
        return (drv.CUresult.CUDA_SUCCESS, b"CUDA_ERROR_INVALID_VALUE")
L._drv = FakeDrv

def fake_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    argv = (ctypes.c_void_p * 64).from_address(params)
    words = [ctypes.c_uint64.from_address(argv[i]).value for i in range(n_params)]
    calls.append(dict(f=int(f), grid=[gx, gy, gz], block=[bx, by, bz], shared=shared, stream=stream,
                      extra=extra, words=words))
    return (drv.CUresult(req["result"]),)

sig = "void(float32[:, :], int64[::1], float64, int32)"
k = L.CompiledKernel.from_function(drv.CUfunction(0xABC0), L.normalize_argtypes(sig), "_Zk", {"regs": 9})
x = L.ArgView(req["px"], (3, 4), (64, 8), 4, np.float32)
y = (req["py"], (5,), (8,), 8)
pl = k.prepare((2, 3), 64, (x, y, 0.5, -7), shared=req["shared"])
n_params = len(pl.params)
pl._launch = fake_launch
class Stream:
    def __cuda_stream__(self):
        return (0, 4242)
err = None
try:
    pl.run(None, Stream())
    pl.run([req["px2"], L.ArgView(req["py2"], (5,), (8,), 8)], 17)
except L.LaunchError as e:
    err = dict(code=e.code, msg=str(e), result=int(e.result))
print("GPUPATH " + json.dumps(dict(calls=calls, attrs=attrs, err=err, n=n_params)))
'''


def _gpu_path(rng, result=0, shared=0):
    ptrs = {k: int(rng.integers(1, 1 << 36)) * 256 for k in ("px", "py", "px2", "py2")}
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    req = dict(ptrs, result=result, shared=shared)
    p = subprocess.run([sys.executable, "-c", GPU_PATH_CHILD], input=json.dumps(req), capture_output=True,
                       text=True, env=env, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("GPUPATH ")]
    assert line, p.stderr[-3000:]
    return ptrs, json.loads(line[0][8:])


def test_gpu_path_launch_arguments_and_patching(rng):
    """GPU-side PreparedLaunch, cuLaunchKernel recorded: dims, stream, shared memory, patched slots."""
    ptrs, r = _gpu_path(rng, shared=100_000)
    assert r["err"] is None and r["n"] == 9 + 7 + 2
    assert r["attrs"] == [[0xABC0, 8, 100_000]]  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES opt-in
    c1, c2 = r["calls"]
    assert c1["f"] == 0xABC0 and c1["grid"] == [2, 3, 1] and c1["block"] == [64, 1, 1]
    assert c1["shared"] == 100_000 and c1["stream"] == 4242 and c2["stream"] == 17 and c1["extra"] == 0
    x_slots = [0, 0, 12, 4, ptrs["px"], 3, 4, 64, 8]
    y_slots = [0, 0, 5, 8, ptrs["py"], 5, 8]
    assert c1["words"][:16] == x_slots + y_slots
    assert struct.unpack("<d", struct.pack("<Q", c1["words"][16]))[0] == 0.5
    assert struct.unpack("<i", struct.pack("<I", c1["words"][17] & 0xFFFFFFFF))[0] == -7
    x_slots[4], y_slots[4] = ptrs["px2"], ptrs["py2"]
    assert c2["words"][:16] == x_slots + y_slots and c2["words"][16:] == c1["words"][16:]


def test_gpu_path_failed_launch_raises_with_cuda_result(rng):
    _, r = _gpu_path(rng, result=1)  # CUDA_ERROR_INVALID_VALUE
    assert r["err"]["code"] == 1 and r["err"]["result"] == 1
    assert "CUDA_ERROR_INVALID_VALUE" in r["err"]["msg"] and len(r["calls"]) == 1
