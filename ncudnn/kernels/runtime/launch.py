"""Direct kernel launches: compile a numba kernel once, then launch it with ``cuLaunchKernel``.

A numba launch (``kern[grid, block](*args)``) types every argument, wraps each array in a numba
device array and builds the parameter list on every call (tens of microseconds a launch on an H200, more with
torch tensors; docs/launch.md). Here that work happens once:

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

Modules: this one (errors, :class:`CompiledKernel`, :class:`PreparedLaunch`), :mod:`ncudnn.kernels.runtime.launch_args` (views,
the ABI flattening and packing, argument types; its public names are importable from here too) and
:mod:`ncudnn.kernels.runtime.launch_sim` (the simulator's prepared launch).
"""
import ctypes
import threading

import numpy as np
from numba.cuda import types

from .launch_args import (SIM, ArgView, as_arg_view, data_pointer, dim3,  # noqa: F401 (public here too)
                          flatten_args, normalize_argtypes, pack_params, stream_handle, typeof_arg)
from .launch_sim import SimPreparedLaunch

__all__ = ["SIM", "ArgView", "CompiledKernel", "PreparedLaunch", "LaunchError", "as_arg_view",
           "flatten_args", "pack_params", "typeof_arg", "normalize_argtypes", "stream_handle", "data_pointer",
           "dim3"]

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
            return SimPreparedLaunch(self, grid, block, shared, args, ptrs)
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
