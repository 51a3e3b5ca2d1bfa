"""Test helpers: the float64 oracle of a whole validated pygraph (ncudnn.reference.run_node over its IR
nodes in order), strided device buffers, and whether an engine for a subgraph kind is registered."""
import numpy as np
from numba import cuda

from ncudnn.engines import registry
from ncudnn.reference.ops import run_node
from ncudnn.testing import poison_value


def has_engine(kind):
    """True when a registered engine accepts subgraphs of ``kind`` ("conv_fprop", "norm_fwd", ...)."""
    return any(kind in getattr(e, "kinds", ()) for e in registry.engines())


def graph_oracle(g, inputs):
    """float64 values of every tensor of ``g`` (validated) from ``inputs`` {uid: host array or scalar};
    by-value tensors not given supply their own value."""
    vals = {uid: np.asarray(v, dtype=np.float64) for uid, v in inputs.items()}
    for node in g.ir.nodes:
        ins = {p: vals[t.uid] if t.uid in vals else np.asarray(t.value, dtype=np.float64)
               for p, t in node.inputs.items()}
        outs = run_node(node, ins)
        for port, t in node.outputs.items():
            vals[t.uid] = outs[port]
    return vals


def to_device_strided(a, strides, dtype):
    """A device buffer holding ``a`` (cast to ``dtype``) laid out at element ``strides``."""
    order = sorted(range(a.ndim), key=lambda i: -strides[i])
    return cuda.to_device(np.ascontiguousarray(a.astype(dtype).transpose(order)).reshape(-1))


def poisoned(dims, strides, dtype):
    n = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
    return cuda.to_device(np.full(n, poison_value(dtype), dtype))


def read_strided(buf, dims, strides):
    host = buf.copy_to_host()
    return np.lib.stride_tricks.as_strided(host, dims, [s * host.itemsize for s in strides]).copy()
