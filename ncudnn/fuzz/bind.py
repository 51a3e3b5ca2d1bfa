"""Device buffers laid out exactly as a graph declares its tensors, with guards and gap checks.

Each non-virtual tensor gets one flat device allocation: a guard of 256 bytes, then the tensor's span
(dims and strides as declared, gaps between padded rows included), then another guard; the variant pack
holds the span alone. Before each run an input's elements get the draw's values and every other element
of its allocation NaN (an engine reading a gap or past the span computes NaN); an output's elements get
the poison value and the rest a sentinel. After the run the output's elements are compared with the
oracle and every other element of every allocation, inputs included, must be bit-for-bit what was
uploaded.

A buffer's host images (one per draw, made by :meth:`Buffer.image_of`) are uploaded by
:meth:`Buffer.upload`, which skips an input whose device copy is known to hold that image already (it
was uploaded and every check since found it unchanged); reads land in one host array allocated with
the buffer.
"""
import numpy as np
from numba import cuda

from ..memory import kernel_dtype, numpy_dtype
from ..testing import poison_value, to_f64

GUARD_BYTES = 256


def _float_like(dt):
    """Floating types, ml_dtypes' bfloat16 / FP8 included (NumPy files some of them under kind 'V')."""
    return dt.kind == "f" or dt.name.startswith(("float", "bfloat"))


def _poison(dtype):
    return np.nan if _float_like(np.dtype(dtype)) else poison_value(dtype)


def _gap_value(dtype, output):
    """What fills the elements outside a tensor's view: NaN around inputs, a finite sentinel around
    outputs (so a stray write of NaN shows too); integer types a sentinel either way."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return False
    if dt.kind in "iu":
        return np.iinfo(dt).max - 3 if output else np.iinfo(dt).min + 3
    return -31.25 if output else np.nan


class Buffer:
    """One tensor's allocation: ``arg`` is what the variant pack binds; ``index`` the flat position of
    every element of the view (dims-shaped)."""

    def __init__(self, desc, output):
        self.uid, self.name, self.output = desc.uid, desc.name, output
        self.dims, self.strides = tuple(desc.dims), tuple(desc.strides)
        self.dtype = numpy_dtype(desc.dtype)
        self.store = kernel_dtype(self.dtype)
        self.guard = max(1, GUARD_BYTES // self.dtype.itemsize)
        span = 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides)) if all(self.dims) else 0
        self.span = span
        total = span + 2 * self.guard
        grid = np.indices(self.dims, dtype=np.int64) if self.dims else np.zeros((0,), np.int64)
        self.index = self.guard + sum(g * s for g, s in zip(grid, self.strides)) if self.dims else \
            np.array(self.guard, np.int64)
        outside = np.ones(total, bool)
        outside[self.index.reshape(-1)] = False
        self.outside = np.flatnonzero(outside)
        self.dev = cuda.device_array(total, dtype=self.store)
        self.host = np.empty(total, dtype=self.store)
        self.arg = self.dev[self.guard:self.guard + span]
        base = np.full(total, _gap_value(self.dtype, output), dtype=self.dtype)
        if output:
            base[self.index] = _poison(self.dtype)
        self.base = base
        self.base_outside = _bits(base)[self.outside]     # what every element outside the view must stay
        self.image = base
        self.clean = False          # the device copy is known to be ``image``

    def image_of(self, values):
        """(host image: the gap pattern with ``values`` (dims-shaped, any float type) at the view's elements,
        the values as the buffer holds them in float64 for the oracle)."""
        img = self.base.copy()
        img[self.index] = np.asarray(values).astype(self.dtype)
        return img, to_f64(img[self.index])

    def upload(self, img=None):
        """Put ``img`` (default: the base pattern, the poisoned output) on the device, unless it is known
        to be there already."""
        img = self.base if img is None else img
        if img is self.image and self.clean:
            return
        self.image = img
        self.dev.copy_to_device(img.view(self.store))
        self.clean = not self.output      # a run writes an output: upload it again before the next

    def fill(self, values=None):
        """Upload the gap pattern with ``values`` at the view's elements (None: the base pattern). Returns
        the values as the buffer holds them (float64), None without values."""
        img, held = self.image_of(values) if values is not None else (None, None)
        self.clean = False
        self.upload(img)
        return held

    def _download(self):
        self.dev.copy_to_host(self.host)
        return self.host.view(self.dtype)

    def read(self):
        """(the view's elements as the device holds them, True when everything outside is unchanged)."""
        back = self._download()
        expect = self.base_outside if self.image is self.base else _bits(self.image)[self.outside]
        return back[self.index], np.array_equal(_bits(back)[self.outside], expect)

    def unchanged(self):
        """An input: is the whole allocation (view included) bit-for-bit what was uploaded? (If not, the
        next upload puts it back.)"""
        same = np.array_equal(_bits(self._download()), _bits(self.image))
        self.clean = self.clean and same
        return same

    def view_of(self, dims, strides, offset, image=None):
        """Values of another view (a pygraph slice / transpose of this input) over ``image`` (default: the
        image last uploaded)."""
        grid = np.indices(dims, dtype=np.int64)
        idx = self.guard + int(offset) + sum(g * s for g, s in zip(grid, strides))
        return to_f64((self.image if image is None else image)[idx])


def _bits(a):
    """The elements of ``a`` as unsigned integers of their size (NaN compares equal to itself)."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def draw_values(rng, dims, dtype, lo, hi):
    """Uniform values in [lo, hi) (integers for integer types), as float64, for an input of ``dtype``."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, size=dims).astype(np.float64)
    if dt.kind == "b":
        return (rng.random(size=dims) < 0.5).astype(np.float64)
    return rng.uniform(lo, hi, size=dims)
