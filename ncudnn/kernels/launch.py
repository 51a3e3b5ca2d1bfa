"""Direct kernel launches: compile a numba kernel once, then launch it with ``cuLaunchKernel``.

A numba launch (``kern[grid, block](*args)``) types every argument, wraps each array in a numba
device array and builds the parameter list on every call (18.7 us with numba arrays, 48.7 us with
torch tensors on an H200). Here that work happens once:

* :class:`CompiledKernel` compiles a ``cuda.jit`` dispatcher for one signature (given, or taken from
  the first call's arguments) and keeps the driver ``CUfunction`` and its attributes.
* :meth:`CompiledKernel.prepare` flattens the arguments into numba's kernel ABI (see
  :func:`flatten_args`) inside a parameter buffer and returns a :class:`PreparedLaunch`.
* :meth:`PreparedLaunch.run` patches the array data pointers in that buffer and calls
  ``cuda.bindings.driver.cuLaunchKernel``: the hot path.

numba's kernel ABI (numba-cuda 0.30.4, ``_Kernel._prepare_args``): every argument becomes one or more
PTX ``.param`` entries, in order. An array of ndim d becomes 5 + 2d 64-bit values ``meminfo (0),
parent (0), nitems, itemsize, data pointer, shape[0..d), strides[0..d) (bytes)``; a record becomes
the device pointer of the record; a CPointer its integer value; integers their own width;
boolean one byte; float16 its 16 bits; float32 / float64 themselves; complex two floats; tuples
are flattened element by element. Each value sits in its own 8-byte slot of the buffer and the
pointer array handed to the driver points at the slots.

Array arguments may be anything with ``__cuda_array_interface__`` (numba, CuPy), a torch tensor
(read through ``data_ptr`` / ``stride``: torch's CAI is slow and refuses grad tensors), an object
with ``ptr, shape, strides, dtype`` (ncudnn ``DeviceView``: strides in elements), or an
:class:`ArgView` / ``(ptr, shape, strides_bytes, itemsize[, dtype])`` tuple. No numba device array
is created.

Under the CUDA simulator (``numba.cuda.core.config.ENABLE_CUDASIM``) there is no driver: the same API
calls ``dispatcher[grid, block, 0, shared](*args)`` with simulator arrays, rebuilding an array over
host memory wherever a pointer or view was given.
"""
import ctypes
import struct
import threading
from typing import NamedTuple

import numpy as np
from numba.cuda import types
from numba.cuda.core import config as _config
from numba.cuda.core import sigutils
from numba.cuda.np import numpy_support

__all__ = ["SIM", "ArgView", "CompiledKernel", "PreparedLaunch", "LaunchError", "as_arg_view",
           "flatten_args", "pack_params", "typeof_arg", "normalize_argtypes", "stream_handle", "data_pointer",
           "dim3"]

SIM = bool(_config.ENABLE_CUDASIM)
#: Dynamic shared memory a kernel may use without opting in through the function attribute.
DEFAULT_DYNAMIC_SMEM = 48 * 1024

if not SIM:
    from cuda.bindings import driver as _drv

    _SUCCESS = _drv.CUresult.CUDA_SUCCESS
    _cuLaunchKernel = _drv.cuLaunchKernel
    _cuLaunchCooperativeKernel = _drv.cuLaunchCooperativeKernel


# ------------------------------------------------------------------------------------------ errors

class LaunchError(RuntimeError):
    """A driver call behind a launch failed; ``result`` is the CUresult, ``code`` its integer value."""

    def __init__(self, result, what="cuLaunchKernel", kernel=None):
        self.result = result
        self.code = int(result)
        self.kernel = kernel
        name = _error_name(result)
        where = f" for kernel {kernel}" if kernel else ""
        super().__init__(f"{what}{where} failed: {name} ({self.code})")


def _error_name(result):
    if SIM:
        return str(result)
    try:
        err, name = _drv.cuGetErrorName(result)
        return name.decode() if int(err) == 0 else str(result)
    except Exception:
        return str(result)


def _check(ret, what, kernel=None):
    """Unpack a cuda.bindings result tuple, raising LaunchError on a non-success CUresult."""
    err = ret[0]
    if err != _SUCCESS:
        raise LaunchError(err, what, kernel)
    if len(ret) == 1:
        return None
    return ret[1] if len(ret) == 2 else ret[1:]


# ------------------------------------------------------------------------------- argument views

class ArgView(NamedTuple):
    """An array argument described without any array object: strides in bytes."""

    ptr: int
    shape: tuple
    strides: tuple
    itemsize: int
    dtype: object = None


def _c_strides(shape, itemsize):
    strides, acc = [], itemsize
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def _is_view_tuple(obj):
    return (type(obj) is tuple and len(obj) in (4, 5) and isinstance(obj[0], int)
            and isinstance(obj[1], tuple) and isinstance(obj[2], tuple) and isinstance(obj[3], int))


def _from_cai(cai):
    shape = tuple(int(d) for d in cai["shape"])
    dt = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    strides = _c_strides(shape, dt.itemsize) if strides is None else tuple(int(s) for s in strides)
    return ArgView(int(cai["data"][0] or 0), shape, strides, dt.itemsize, dt)


def _from_torch(t):
    """torch tensors without their CAI (slow, and refused for tensors that require grad)."""
    if not SIM and not getattr(t, "is_cuda", True):
        raise TypeError(f"tensor on {getattr(t, 'device', 'the host')} is host memory, not a device array")
    it = int(t.element_size())
    try:
        dt = np.dtype(str(t.dtype).rsplit(".", 1)[-1])
    except TypeError:
        dt = None  # bfloat16 / fp8: the kernel signature gives the storage type
    return ArgView(int(t.data_ptr()), tuple(int(d) for d in t.shape), tuple(int(s) * it for s in t.stride()),
                   it, dt)


def _from_ndarray(a):
    return ArgView(int(a.__array_interface__["data"][0]), tuple(a.shape), tuple(a.strides),
                   a.dtype.itemsize, a.dtype)


def as_arg_view(obj):
    """:class:`ArgView` of an array argument (see the module docstring for what is accepted)."""
    if isinstance(obj, ArgView):
        return obj
    if _is_view_tuple(obj):
        return ArgView(*obj)
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "element_size", None)):
        return _from_torch(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai)
    if SIM:
        ary = getattr(obj, "_ary", None)  # simulator device array: host memory
        if isinstance(ary, np.ndarray):
            return _from_ndarray(ary)
        if isinstance(obj, np.ndarray):
            return _from_ndarray(obj)
    sb = getattr(obj, "strides_bytes", None)
    if sb is not None:
        return ArgView(int(obj.ptr), tuple(obj.shape), tuple(sb), int(obj.itemsize),
                       getattr(obj, "dtype", None))
    if hasattr(obj, "ptr") and hasattr(obj, "dtype") and hasattr(obj, "strides"):
        dt = np.dtype(obj.dtype)  # ncudnn DeviceView convention: strides in elements
        return ArgView(int(obj.ptr), tuple(obj.shape), tuple(int(s) * dt.itemsize for s in obj.strides),
                       dt.itemsize, dt)
    raise TypeError(f"{type(obj).__name__} is not a device array argument (no __cuda_array_interface__, "
                    "not an ArgView / (ptr, shape, strides_bytes, itemsize) tuple)")


_PTR_GETTERS = {int: int}


def _ptr_getter(obj):
    if isinstance(obj, tuple):
        return lambda o: int(o[0])
    if callable(getattr(obj, "data_ptr", None)):  # torch: much cheaper than its CAI property
        return lambda o: o.data_ptr()
    if hasattr(obj, "device_ctypes_pointer"):  # numba device array
        return lambda o: o.device_ctypes_pointer.value or 0
    if hasattr(obj, "__cuda_array_interface__"):
        return lambda o: int(o.__cuda_array_interface__["data"][0] or 0)
    if isinstance(getattr(obj, "ptr", None), int):
        return lambda o: o.ptr
    return lambda o: as_arg_view(o).ptr


def data_pointer(obj):
    """Device address of an array argument or integer pointer (cached per argument type)."""
    t = type(obj)
    get = _PTR_GETTERS.get(t)
    if get is None:
        get = _PTR_GETTERS[t] = _ptr_getter(obj)
    return get(obj)


def stream_handle(stream):
    """Integer CUstream of an int, None, a numba stream (``.handle``), a torch stream (``.cuda_stream``),
    anything with ``__cuda_stream__`` or a cuda.bindings CUstream."""
    if stream is None:
        return 0
    if type(stream) is int:
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int((proto() if callable(proto) else proto)[1])
    h = getattr(stream, "cuda_stream", None)
    if h is None:
        h = getattr(stream, "handle", None)
    if h is None:
        h = stream
    if isinstance(h, ctypes.c_void_p):
        return h.value or 0
    return int(h)  # cuda-python handle objects give their value through int(); getPtr() is the storage address


def dim3(d):
    """(x, y, z) of an int or a 1-3 tuple."""
    if isinstance(d, (int, np.integer)):
        return (int(d), 1, 1)
    d = tuple(int(x) for x in d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"launch dimension {d} must have 1 to 3 entries")
    return d + (1,) * (3 - len(d))


# ------------------------------------------------------------------------------------------- ABI

_INT_FMT = {(8, True): "b", (8, False): "B", (16, True): "h", (16, False): "H",
            (32, True): "i", (32, False): "I", (64, True): "q", (64, False): "Q"}


def _contiguous(shape, strides, itemsize, order):
    dims = list(zip(shape, strides))
    if order == "C":
        dims.reverse()
    expected = itemsize
    for d, s in dims:
        if d == 0:
            return True
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def _check_array(ty, v, where):
    if len(v.shape) != ty.ndim or len(v.strides) != ty.ndim:
        raise TypeError(f"{where}: array of ndim {len(v.shape)} for parameter type {ty}")
    want = ty.dtype.size if isinstance(ty.dtype, types.Record) else ty.dtype.bitwidth // 8
    if v.itemsize != want:
        raise TypeError(f"{where}: itemsize {v.itemsize} for parameter type {ty} ({want} bytes)")
    if ty.layout in ("C", "F") and not _contiguous(v.shape, v.strides, v.itemsize, ty.layout):
        raise TypeError(f"{where}: strides {v.strides} are not {ty.layout}-contiguous for {ty}")


def _flatten(ty, val, out, ptrs, where):
    if isinstance(ty, types.Array):
        v = as_arg_view(val)
        _check_array(ty, v, where)
        out += [("q", 0), ("q", 0), ("q", int(np.prod(v.shape, dtype=np.int64))), ("q", v.itemsize)]
        ptrs.append((len(out), ty, val, where))
        out.append(("Q", v.ptr))
        out += [("q", int(d)) for d in v.shape]
        out += [("q", int(s)) for s in v.strides]
    elif isinstance(ty, (types.Record, types.CPointer)):
        p = val if isinstance(val, int) else None
        ptrs.append((len(out), ty, val, where))
        out.append(("Q", 0 if p is None else p))
    elif isinstance(ty, types.Boolean):
        out.append(("?", bool(val)))
    elif isinstance(ty, types.Integer):
        out.append((_INT_FMT[(ty.bitwidth, ty.signed)], int(val)))
    elif ty == types.float16:
        out.append(("H", int(np.float16(val).view(np.uint16))))
    elif ty == types.float32:
        out.append(("f", float(val)))
    elif ty == types.float64:
        out.append(("d", float(val)))
    elif ty in (types.complex64, types.complex128):
        f = "f" if ty == types.complex64 else "d"
        out += [(f, complex(val).real), (f, complex(val).imag)]
    elif isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
        out.append(("q", int(np.asarray(val).view(np.int64))))
    elif isinstance(ty, types.BaseTuple):
        if len(ty) != len(val):
            raise TypeError(f"{where}: {len(val)} values for {ty}")
        for i, (t, v) in enumerate(zip(ty, val)):
            _flatten(t, v, out, ptrs, f"{where}[{i}]")
    elif isinstance(ty, types.EnumMember):
        _flatten(ty.dtype, val.value, out, ptrs, where)
    else:
        raise NotImplementedError(f"{where}: kernel parameter type {ty} is not supported")


def flatten_args(argtypes, args):
    """numba's kernel ABI for ``args`` of ``argtypes``.

    Returns ``(params, ptrs)``: ``params`` is the list of ``(struct format, value)`` PTX parameters in
    order; ``ptrs`` lists the pointer-carrying parameters (arrays, records, CPointers) as
    ``(param index, type, argument, where)``: the slots :meth:`PreparedLaunch.run` patches.
    """
    if len(argtypes) != len(args):
        raise TypeError(f"{len(args)} arguments for a kernel of {len(argtypes)} parameters")
    params, ptrs = [], []
    for i, (ty, val) in enumerate(zip(argtypes, args)):
        _flatten(ty, val, params, ptrs, f"argument {i}")
    return params, ptrs


def pack_params(params):
    """(value buffer, pointer array) for cuLaunchKernel: each parameter in its own 8-byte slot."""
    n = max(len(params), 1)
    vals = (ctypes.c_uint64 * n)()
    for i, (fmt, v) in enumerate(params):
        struct.pack_into("<" + fmt, vals, 8 * i, v)
    base = ctypes.addressof(vals)
    argv = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
    return vals, argv


# ------------------------------------------------------------------------------ argument types

def typeof_arg(val):
    """numba type of a launch argument, as numba's dispatcher would choose it."""
    if isinstance(val, (bool, np.bool_)):
        return types.boolean
    if isinstance(val, int):
        return types.int64
    if isinstance(val, float):
        return types.float64
    if isinstance(val, complex):
        return types.complex128
    if isinstance(val, np.generic):
        return numpy_support.from_dtype(val.dtype)
    if isinstance(val, tuple) and not isinstance(val, ArgView) and not _is_view_tuple(val):
        return types.BaseTuple.from_types([typeof_arg(v) for v in val])
    v = as_arg_view(val)
    if v.dtype is None or np.dtype(v.dtype).kind == "V" and np.dtype(v.dtype).fields is None:
        raise TypeError("an array argument without a dtype needs an explicit signature")
    if _contiguous(v.shape, v.strides, v.itemsize, "C"):
        layout = "C"
    elif _contiguous(v.shape, v.strides, v.itemsize, "F"):
        layout = "F"
    else:
        layout = "A"
    return types.Array(numpy_support.from_dtype(np.dtype(v.dtype)), len(v.shape), layout)


def normalize_argtypes(signature):
    """Tuple of numba argument types of a signature string, ``void(...)`` object or type tuple."""
    argtypes, ret = sigutils.normalize_signature(signature)
    if ret is not None and ret != types.none:
        raise TypeError(f"a kernel returns void, not {ret}")
    return tuple(argtypes)


# ------------------------------------------------------------------------------ the kernel

class CompiledKernel:
    """One kernel specialization, compiled once; launched without numba's per-call dispatch.

    ``CompiledKernel(dispatcher, signature=None)``: with no signature, the first :meth:`prepare` or
    :meth:`launch` compiles for its arguments' types (or the dispatcher's only overload).
    ``attrs``: regs, shared, local, const, maxthreads (driver values; empty in the simulator).
    """

    def __init__(self, dispatcher=None, signature=None, name=None):
        self.dispatcher = dispatcher
        self.argtypes = None
        self.name = name or getattr(getattr(dispatcher, "py_func", None), "__name__", "kernel")
        self.function = None      # driver CUfunction (GPU)
        self.entry_name = None    # mangled symbol in the cubin
        self.attrs = {}
        self.cooperative = False
        self.numba_kernel = None  # numba's _Kernel when compiled here (not when loaded from a cubin)
        self.module = None        # CUmodule when loaded from a cubin (kept alive here)
        self._smem_limit = DEFAULT_DYNAMIC_SMEM
        self._lock = threading.Lock()
        if signature is None and not SIM and dispatcher is not None and len(dispatcher.overloads) == 1:
            signature = next(iter(dispatcher.overloads))
        if signature is not None:
            self._compile(normalize_argtypes(signature))

    @classmethod
    def from_function(cls, function, argtypes, entry_name, attrs, module=None, name=None,
                      cooperative=False):
        """Wrap a driver CUfunction already loaded (kernel cache warm start): no numba involved."""
        k = cls(None, None, name=name or entry_name)
        k.function, k.argtypes, k.entry_name = function, tuple(argtypes), entry_name
        k.attrs, k.module, k.cooperative = dict(attrs), module, cooperative
        return k

    # ---- compile
    def _compile(self, argtypes):
        with self._lock:
            if self.argtypes is not None:
                return
            if not SIM:
                kern = self.dispatcher.compile(argtypes)
                cufunc = kern.library.get_cufunc()
                kern.bind()
                self.function = _function_of(cufunc.handle)
                a = cufunc.attrs
                self.attrs = dict(regs=a.regs, shared=a.shared, local=a.local, const=a.const,
                                  maxthreads=a.maxthreads)
                self.entry_name = kern.entry_name
                self.cooperative = bool(kern.cooperative)
                self.numba_kernel = kern
                argtypes = tuple(kern.argument_types)  # a specialised dispatcher keeps its own types
            self.argtypes = argtypes

    def ensure_compiled(self, args):
        """Compile for the argument types of ``args`` unless already compiled."""
        if self.argtypes is None:
            if self.dispatcher is None:
                raise RuntimeError("CompiledKernel has neither a dispatcher nor a function")
            self._compile(tuple(typeof_arg(a) for a in args))
        return self

    # ---- launch
    def prepare(self, grid, block, args, shared=0):
        """A :class:`PreparedLaunch` for this grid / block / dynamic shared memory and these arguments."""
        self.ensure_compiled(args)
        params, ptrs = flatten_args(self.argtypes, args)
        grid, block, shared = dim3(grid), dim3(block), int(shared)
        if SIM:
            return _SimPreparedLaunch(self, grid, block, shared, args, ptrs)
        if shared > self._smem_limit:
            self._opt_in_smem(shared)
        return PreparedLaunch(self, grid, block, shared, params, ptrs)

    def launch(self, grid, block, args, stream=0, shared=0):
        """Prepare and run once (packs every argument: slower than a kept :class:`PreparedLaunch`)."""
        self.prepare(grid, block, args, shared).run(None, stream)

    def __getitem__(self, config):
        """``kernel[grid, block, stream, shared](*args)``, as with a numba dispatcher."""
        grid, block = config[0], config[1]
        stream = config[2] if len(config) > 2 else 0
        shared = config[3] if len(config) > 3 else 0
        return lambda *args: self.launch(grid, block, args, stream, shared)

    def _opt_in_smem(self, nbytes):
        attr = _drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(_drv.cuFuncSetAttribute(self.function, attr, int(nbytes)),
               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", self.name)
        self._smem_limit = int(nbytes)

    def __repr__(self):
        return f"<CompiledKernel {self.name} {self.argtypes}>"


def _function_of(handle):
    """CUfunction for numba's loaded kernel handle (a CUkernel from cuLibraryLoadData, or a CUfunction)."""
    if isinstance(handle, _drv.CUfunction):
        return handle
    kernel = handle if isinstance(handle, _drv.CUkernel) else _drv.CUkernel(int(handle))
    err, fn = _drv.cuKernelGetFunction(kernel)
    if err == _SUCCESS:
        return fn
    return _drv.CUfunction(int(kernel))  # a CUkernel may be launched cast to CUfunction


class PreparedLaunch:
    """Grid, block, shared memory and a packed parameter buffer; :meth:`run` is the hot path.

    ``n_ptrs``: how many pointer slots :meth:`run` takes (array, record and CPointer parameters, in
    argument order, tuple members included). Thread-safe (a lock guards patch + launch).
    """

    def __init__(self, kernel, grid, block, shared, params, ptrs):
        self.kernel = kernel
        self.grid, self.block, self.shared = grid, block, shared
        self.params = params
        self._vals, self._argv = pack_params(params)
        self._argv_addr = ctypes.addressof(self._argv)
        self._slots = tuple(p[0] for p in ptrs)
        self.n_ptrs = len(self._slots)
        self._keep = [p[2] for p in ptrs]  # keep prepare-time arguments alive
        for i, (slot, ty, val, where) in enumerate(ptrs):
            if isinstance(ty, (types.Record, types.CPointer)) and not isinstance(val, int):
                self._vals[slot] = _record_pointer(val, ty, self._keep)
        self._launch = _cuLaunchCooperativeKernel if kernel.cooperative else _cuLaunchKernel
        self._head = (kernel.function, *grid, *block, shared)
        self._tail = (self._argv_addr, 0) if not kernel.cooperative else (self._argv_addr,)
        self._lock = threading.Lock()

    def run(self, ptrs=None, stream=0):
        """Patch the data pointers (``n_ptrs`` ints or array-likes; None keeps the last ones), launch."""
        if type(stream) is not int:
            stream = stream_handle(stream)
        with self._lock:
            if ptrs is not None:
                if len(ptrs) != self.n_ptrs:
                    raise ValueError(f"{len(ptrs)} pointers for {self.n_ptrs} pointer parameters")
                vals = self._vals
                for slot, p in zip(self._slots, ptrs):
                    vals[slot] = p if type(p) is int else data_pointer(p)
            err = self._launch(*self._head, stream, *self._tail)[0]
        if err != _SUCCESS:
            self._retry_or_raise(err, stream)

    def _retry_or_raise(self, err, stream):
        # A thread with no current context: make numba's (primary) context current once and retry.
        if err == _drv.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            from numba import cuda
            cuda.current_context()
            with self._lock:
                ret = self._launch(*self._head, stream, *self._tail)
            if ret[0] == _SUCCESS:
                return
            err = ret[0]
        raise LaunchError(err, "cuLaunchKernel", self.kernel.name)


def _record_pointer(val, ty, keep):
    """Device pointer of a record / pointer argument: CAI object, view, or a host record copied once."""
    if isinstance(val, np.void) and isinstance(ty, types.Record):
        host = np.array(val)
        dptr = _check(_drv.cuMemAlloc(max(host.nbytes, 1)), "cuMemAlloc")
        _check(_drv.cuMemcpyHtoD(dptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
        keep.append(_DeviceBuffer(dptr))
        return int(dptr)
    return data_pointer(val)


class _DeviceBuffer:
    """A cuMemAlloc allocation freed with its owner (records passed by value)."""

    def __init__(self, dptr):
        self.dptr = dptr

    def __del__(self):
        try:
            _drv.cuMemFree(self.dptr)
        except Exception:
            pass


# ------------------------------------------------------------------------------- simulator

class _SimPreparedLaunch:
    """Simulator twin of :class:`PreparedLaunch`: runs ``dispatcher[grid, block, 0, shared](*args)``."""

    def __init__(self, kernel, grid, block, shared, args, ptrs):
        self.kernel = kernel
        self.grid, self.block, self.shared = grid, block, shared
        self.n_ptrs = len(ptrs)
        self._paths = [_path_of(p[3]) for p in ptrs]
        self._specs = [(p[1], p[2]) for p in ptrs]  # (type, prepare-time argument: shape source)
        self._args = [_as_list(a) for a in args]
        for path, (ty, val) in zip(self._paths, self._specs):
            _set_path(self._args, path, _sim_value(val, ty, val))
        self._lock = threading.Lock()

    def run(self, ptrs=None, stream=0):
        with self._lock:
            if ptrs is not None:
                if len(ptrs) != self.n_ptrs:
                    raise ValueError(f"{len(ptrs)} pointers for {self.n_ptrs} pointer parameters")
                for path, (ty, val), p in zip(self._paths, self._specs, ptrs):
                    _set_path(self._args, path, _sim_value(p, ty, val))
            args = [_as_tuple(a) for a in self._args]
            self.kernel.dispatcher[self.grid, self.block, 0, self.shared](*args)


def _path_of(where):
    # "argument 3[1][0]" -> (3, 1, 0)
    head, *rest = where.split("[")
    return (int(head.split()[1]),) + tuple(int(r.rstrip("]")) for r in rest)


def _as_list(a):
    if isinstance(a, tuple) and not isinstance(a, ArgView) and not _is_view_tuple(a):
        return [_as_list(x) for x in a]
    return a


def _as_tuple(a):
    return tuple(_as_tuple(x) for x in a) if isinstance(a, list) else a


def _set_path(args, path, value):
    for i in path[:-1]:
        args = args[i]
    args[path[-1]] = value


def _sim_value(p, ty, spec):
    """A simulator argument for pointer parameter ``ty``: arrays pass through, pointers become views."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if isinstance(p, FakeCUDAArray) or isinstance(p, np.void):
        return p
    if isinstance(p, np.ndarray):
        return FakeCUDAArray(p)
    if isinstance(ty, types.CPointer):
        return data_pointer(p)
    ptr = data_pointer(p)
    if isinstance(ty, types.Record):
        return _host_array(ptr, (), (), numpy_support.as_dtype(ty))[()]
    ref = as_arg_view(spec)  # run() patches the pointer only: shape and strides stay as prepared
    return FakeCUDAArray(_host_array(ptr, ref.shape, ref.strides, numpy_support.as_dtype(ty.dtype)))


def _host_array(ptr, shape, strides, dtype):
    """NumPy view of host memory at ``ptr`` (simulated device memory is host memory)."""
    if any(int(d) == 0 for d in shape):
        return np.empty(shape, dtype)
    span = sum((int(d) - 1) * int(s) for d, s in zip(shape, strides)) + dtype.itemsize
    buf = (ctypes.c_char * span).from_address(ptr)
    return np.ndarray(shape, dtype, buffer=buf, strides=strides)
