"""What a generator returns, and the seeded random helpers every generator draws from.

A case is named by ``(family, seed, case)``: :func:`case_rng` turns that triple into the one NumPy
generator the family's ``generate(rng)`` draws its graph from, and :func:`draw_rng` into the generator
of input draw ``d``, so the same triple rebuilds the same graph and the same inputs on any machine.
A family of :data:`.families.VARIANT_FAMILIES` draws its graph's structure from
:func:`structure_rng` instead, shared by the :data:`VARIANTS` cases ``VARIANTS * b .. VARIANTS * b +
VARIANTS - 1``, and only its sizes from :func:`case_rng`.
Shapes come from small bounded sets (the same kernels are compiled once and reused across cases),
and on the GPU no generated tensor holds more than :data:`MAX_ELEMENTS` elements (:func:`capped`).
"""
import zlib
from dataclasses import dataclass, field

import numpy as np

import ncudnn as cudnn

DT = cudnn.data_type
#: data types by the name the report and repro lines use
DTYPES = {"float": DT.FLOAT, "half": DT.HALF, "bfloat16": DT.BFLOAT16, "double": DT.DOUBLE}


@dataclass
class Spec:
    """A generated graph: the pygraph (not yet validated), how to draw its inputs and what it is.

    ``ranges``: input tensor name -> (low, high) of its uniform draw (default (-1, 1));
    ``scalars``: by-value tensor name -> value passed in the variant pack;
    ``desc``: one line saying what the graph is (printed with failures);
    ``tol_scale``: a factor on the tolerance where the op amplifies rounding of its inputs (documented
    at the generator)."""
    graph: object
    desc: str
    ranges: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    tol_scale: float = 1.0
    front_end: str = "pygraph"


#: the most elements of one generated tensor (the GPU's shape sets multiply up to millions): each
#: execution fills, reads and compares its tensors on the host and each draw runs the float64 oracle
#: over them, so the per-execution cost grows with this; 2^18 elements still span hundreds of blocks.
#: The simulator's shape sets stay far below it.
MAX_ELEMENTS = 1 << 18


def capped(dims, limit=MAX_ELEMENTS):
    """``dims`` (a list) with its largest extent halved (rounding up) until their product is at most
    ``limit``; unchanged when it already is."""
    dims = [int(d) for d in dims]
    while int(np.prod(dims)) > limit:
        i = max(range(len(dims)), key=lambda j: dims[j])
        dims[i] = (dims[i] + 1) // 2
    return dims


def family_key(family):
    return zlib.crc32(family.encode())


def case_rng(family, seed, case):
    return np.random.default_rng([family_key(family), int(seed), int(case)])


#: consecutive cases that share one graph structure in the variant families (one block of cases)
VARIANTS = 4


def structure_rng(family, seed, case):
    """The generator of the graph structure of ``case``'s block (cases ``case // VARIANTS``)."""
    return np.random.default_rng([family_key(family), int(seed), int(case) // VARIANTS, 1 << 21])


def draw_rng(family, seed, case, draw):
    return np.random.default_rng([family_key(family), int(seed), int(case), 1 << 20, int(draw)])


def graph(dtype, compute=None, name="fuzz"):
    """A pygraph with io type ``dtype`` (a data_type), FLOAT intermediates and ``compute`` (default: FLOAT,
    DOUBLE for DOUBLE io)."""
    if compute is None:
        compute = DT.DOUBLE if dtype == DT.DOUBLE else DT.FLOAT
    inter = DT.DOUBLE if dtype == DT.DOUBLE else DT.FLOAT
    return cudnn.pygraph(name=name, io_data_type=dtype, intermediate_data_type=inter, compute_data_type=compute)


def pick(rng, seq, p=None):
    """One element of ``seq`` (a list or tuple), uniformly or with weights ``p``."""
    return seq[int(rng.choice(len(seq), p=p))]


def packed(dims, order=None):
    """Strides of ``dims`` packed with ``order`` (outermost first; default row-major)."""
    order = list(range(len(dims))) if order is None else list(order)
    strides, s = [0] * len(dims), 1
    for i in reversed(order):
        strides[i] = s
        s *= dims[i]
    return strides


def rand_strides(rng, dims, layout=None, pad_p=0.3, max_pad=3):
    """Strides for ``dims``: ``layout`` 'row' (packed row-major), 'nhwc' (channels last, rank >= 3), a
    dim order (outermost first), or None for a random dim order; each dim's stride padded (gaps between
    rows / planes) with probability ``pad_p`` by up to ``max_pad`` extra elements."""
    n = len(dims)
    if layout == "row":
        order = list(range(n))
    elif layout == "nhwc":
        order = [0] + list(range(2, n)) + [1]
    elif layout is not None:
        order = list(layout)
    else:
        order = list(rng.permutation(n))
    strides, s = [0] * n, 1
    for k, i in enumerate(reversed(order)):
        strides[i] = s
        extent = dims[i]
        if k > 0 and rng.random() < pad_p:  # the innermost dim stays unit-stride
            s = s * extent + int(rng.integers(1, max_pad + 1))
        else:
            s = s * extent
    return strides


def layout_name(dims, strides):
    """'packed' for packed row-major, 'nhwc' for packed channels-last, else 'strided'."""
    if list(strides) == packed(dims):
        return "packed"
    if len(dims) >= 3 and list(strides) == packed(dims, [0] + list(range(2, len(dims))) + [1]):
        return "nhwc"
    return "strided"
