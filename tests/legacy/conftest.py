"""Helpers for the legacy-API tests: descriptors, device buffers, and the engine-or-oracle check.

``check_or_skip`` is the pattern of every numeric test: when the call SUCCEEDED, its device output
must match the float64 reference; when an op's engine is not registered yet (asked of the engine
registry, never a hard-coded list) the call must have returned NOT_SUPPORTED naming the op, the
graph it lowered to is evaluated by the oracle (``reference.run_graph``) and must match the
reference — so the lowering is tested today — and the test is then skipped with the reason.
"""
import numpy as np
import pytest
from numba import cuda

import ncudnn
import ncudnn.legacy as L
from ncudnn.engines import registry
from ncudnn.reference import run_graph
from ncudnn.testing import assert_close, poison_value

S = ncudnn.cudnnStatus_t


@pytest.fixture
def handle():
    st, h = ncudnn.cudnnCreate()
    assert st == S.CUDNN_STATUS_SUCCESS
    yield h
    ncudnn.cudnnDestroy(h)


def tdesc(dims, dtype=ncudnn.CUDNN_DATA_FLOAT, fmt=None, strides=None):
    st, d = L.cudnnCreateTensorDescriptor()
    assert st == 0
    if strides is not None:
        st = L.cudnnSetTensorNdDescriptor(d, dtype, len(dims), dims, strides)[0]
    elif fmt is not None or len(dims) != 4:
        st = L.cudnnSetTensorNdDescriptorEx(d, fmt or 0, dtype, len(dims), dims)[0]
    else:
        st = L.cudnnSetTensor4dDescriptor(d, 0, dtype, *dims)[0]
    assert st == 0, ncudnn.cudnnGetLastErrorString()
    return d


def fdesc(dims, dtype=ncudnn.CUDNN_DATA_FLOAT):
    st, d = L.cudnnCreateFilterDescriptor()
    assert L.cudnnSetFilterNdDescriptor(d, dtype, 0, len(dims), dims)[0] == 0
    return d


def dev(a):
    return cuda.to_device(np.ascontiguousarray(a))


def poisoned(shape, dtype=np.float32):
    return cuda.to_device(np.full(shape, poison_value(dtype), dtype))


def engines_for(kind):
    """Registered engines that accept subgraphs of ``kind`` (an IR op name)."""
    return [e.name for e in registry.engines() if kind in tuple(getattr(e, "kinds", ()))]


def last_lowered(h):
    return next(reversed(h.caches["legacy"].values()))


def _strided(host, t):
    flat = np.ascontiguousarray(host).reshape(-1)
    item = flat.dtype.itemsize
    span = 1 + sum((d - 1) * s for d, s in zip(t.dims, t.strides))
    assert span <= flat.size, f"{t.label}: buffer of {flat.size} elements, descriptor spans {span}"
    return np.lib.stride_tricks.as_strided(flat, shape=t.dims, strides=[s * item for s in t.strides])


def oracle_outputs(h, host, scalars=None):
    """Evaluate the graph the last legacy call lowered to: name -> float64 array of each external
    output. ``host``: the call's buffers' contents before the call (name -> array)."""
    low = last_lowered(h)
    b = low.builder
    vals = {}
    produced = {t.uid for n in low.graph.nodes for t in n.outputs.values()}
    for name, t in b.ext.items():
        if t.uid not in produced:
            vals[t.uid] = _strided(host[name.split(":", 1)[0]], t).astype(np.float64)
    for name, arr in b.constants.items():
        vals[b.scratch[name].uid] = arr.astype(np.float64)
    saved = {}
    for name, t in b.scalars.items():
        v = (scalars or {}).get(name, (scalars or {}).get(name.split(":", 1)[0]))
        if v is not None:
            saved[name] = t.value
            t.value = v
    try:
        env = run_graph(low.graph, vals)
    finally:
        for name, v in saved.items():
            b.scalars[name].value = v
    return {name: env[t.uid] for name, t in b.ext.items() if t.uid in produced}


def check_or_skip(h, ret, kinds, outputs, refs, host, scalars=None, tol="float32", dev_tol=None):
    """The engine-or-oracle check (module docstring). ``outputs``: name -> device array;
    ``refs``: name -> expected float64 array; ``kinds``: IR ops the call needs engines for."""
    status = ret[0]
    missing = [k for k in kinds if not engines_for(k)]
    msg = ncudnn.cudnnGetLastErrorString()
    if status == S.CUDNN_STATUS_SUCCESS:
        for name, ref in refs.items():
            assert_close(outputs[name].copy_to_host(), ref, dev_tol or tol, name)
        return
    assert missing, f"status {S(status).name} although engines exist for {kinds}: {msg}"
    assert status == S.CUDNN_STATUS_NOT_SUPPORTED, msg
    assert "no engine runs" in msg and any(k in msg for k in missing), msg
    got = oracle_outputs(h, host, scalars)
    for name, ref in refs.items():
        assert_close(got[name].reshape(np.shape(ref)), ref, tol, f"{name} (oracle on the lowered graph)")
    pytest.skip(f"no engine for {missing} registered yet: the lowered graph matches the reference in the "
                "oracle; the call returns NOT_SUPPORTED naming it")
