"""Device memory from any producer, as one typed, strided view.

:func:`as_view` turns a torch or CuPy tensor, a numba device array (real or simulated), any object
with ``__cuda_array_interface__`` or ``__dlpack__``, or a raw integer device pointer (with the shape,
strides and dtype of a descriptor) into a :class:`DeviceView`. :func:`to_numba` gives a numba device
array over the same memory, the form kernels take. :func:`allocate` and :class:`WorkspacePool` make
device buffers (numba allocations on a GPU, host memory in the simulator).

The descriptor rule is cuDNN's for raw pointers: a buffer is accepted when it holds at least the bytes
that the descriptor's dims and strides address, whatever the producer's own shape.

In the simulator "device" memory is host memory: numba's simulated arrays (``cuda.to_device``) and
:func:`allocate` buffers are registered by address (sim_regions), so their integer pointers resolve back to
memory, and :func:`to_numba` returns simulated arrays over that memory (NumPy stride tricks).
Plain host arrays (NumPy, CPU tensors) are refused in both places.

Modules: dtypes (element types), view (DeviceView and its geometry), producers (describe / as_view over
every producer), arrays (numba arrays, allocation), sim_regions (the simulator's registered allocations).
"""
from .arrays import WorkspacePool, allocate, to_numba
from .dtypes import CUDNN_TYPE_OF, DTYPE_OF, cudnn_dtype, kernel_dtype, numpy_dtype
from .producers import as_view, describe, device_pointer, int_value, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged
from .view import DeviceView, packed_strides, span_bytes

__all__ = ["DTYPE_OF", "CUDNN_TYPE_OF", "numpy_dtype", "cudnn_dtype", "kernel_dtype", "packed_strides", "span_bytes",
           "DeviceView", "int_value", "describe", "as_view", "device_pointer", "to_numba", "allocate", "WorkspacePool",
           "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLCUDAManaged"]
