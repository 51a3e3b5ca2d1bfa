"""Helpers of the attention engine tests: pygraph SDPA graphs built as cudnn-frontend users write them,
strided device buffers with poisoned gaps, and the float64 oracle (ncudnn.reference.attention).

Layouts (cudnn-frontend's test_mhas names): "bhsd" (packed [B, H, S, D]), "bshd" (packed [B, S, H, D]),
"bs3hd" (Q, K and V interleaved in one [B, S, 3, H, D] buffer; needs equal heads, lengths and dims) and
"sbhd" (packed [S, B, H, D]). Every buffer is allocated with GUARD extra elements and filled with the
poison value; :func:`check_guard` asserts that nothing outside the views was written.
"""
import ml_dtypes
import numpy as np
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import poison_value

GUARD = 7
DTYPES = {"float32": (np.float32, cudnn.data_type.FLOAT), "float16": (np.float16, cudnn.data_type.HALF),
          "bfloat16": (ml_dtypes.bfloat16, cudnn.data_type.BFLOAT16)}
TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 2.5e-2}
#: backward tolerances (the gradients go through more rounded products)
TOL_BWD = {"float32": 5e-5, "float16": 8e-3, "bfloat16": 5e-2}


def strides_of(layout, B, H, S, D):
    """Element strides in [B, H, S, D] order for a packed layout."""
    if layout == "bhsd":
        return [H * S * D, S * D, D, 1]
    if layout == "bshd":
        return [S * H * D, D, H * D, 1]
    if layout == "sbhd":
        return [H * D, D, B * H * D, 1]
    raise ValueError(layout)


def _storage(dtype):
    return np.uint16 if dtype == "bfloat16" else DTYPES[dtype][0]


class DevBuf:
    """A poisoned flat device buffer holding one strided tensor view (or several at offsets)."""

    def __init__(self, nelem, dtype):
        self.dtype = dtype
        st = _storage(dtype)
        fill = 0x7FC0 if dtype == "bfloat16" else poison_value(st)
        self.host = np.full(nelem + GUARD, fill, st)
        self.n = nelem
        self.dev = None
        self.views = []     # (offset, dims, strides)

    def place(self, offset, dims, strides, values=None):
        """Register a view (and write ``values`` into it on the host copy)."""
        self.views.append((offset, tuple(dims), tuple(strides)))
        if values is not None:
            v = np.lib.stride_tricks.as_strided(self.host[offset:], dims,
                                                [s * self.host.itemsize for s in strides])
            v[...] = np.asarray(values).astype(DTYPES[self.dtype][0]).view(_storage(self.dtype)) \
                if self.dtype == "bfloat16" else np.asarray(values).astype(_storage(self.dtype))
        return len(self.views) - 1

    def upload(self):
        self.dev = cuda.to_device(self.host)
        return self

    def view(self, k=0):
        """The device slice of view ``k``: from its offset, exactly the elements its strides reach."""
        off, dims, strides = self.views[k]
        return self.dev[off:off + 1 + sum((d - 1) * s for d, s in zip(dims, strides))]

    def read(self, k=0):
        host = self.dev.copy_to_host()
        off, dims, strides = self.views[k]
        v = np.lib.stride_tricks.as_strided(host[off:], dims, [s * host.itemsize for s in strides]).copy()
        if self.dtype == "bfloat16":
            v = v.view(ml_dtypes.bfloat16)
        return v.astype(np.float64)

    def check_guard(self, name):
        """Elements of the buffer outside every view keep their initial (poison) bits."""
        host = self.dev.copy_to_host()
        inside = np.zeros(host.size, bool)
        for off, dims, strides in self.views:
            idx = off + sum(np.arange(d).reshape([-1 if a == i else 1 for a in range(len(dims))]) * s
                            for i, (d, s) in enumerate(zip(dims, strides)))
            inside[np.asarray(idx).reshape(-1)] = True
        outside = ~inside
        assert host[outside].tobytes() == self.host[outside].tobytes(), \
            f"{name}: elements outside the output view were written"


def rounded(rng, shape, dtype, lo=-1.0, hi=1.0):
    """Fresh random values exactly representable in ``dtype`` (float64 array)."""
    a = rng.uniform(lo, hi, size=shape).astype(DTYPES[dtype][0])
    return a.astype(np.float64)


def qkv_buffers(rng, layout, dtype, B, H, HK, SQ, SK, D, DV):
    """(values {q, k, v}, buffers {q, k, v} as (DevBuf, view index), strides {q, k, v}) for a layout: a packed
    one, "bs3hd" (interleaved QKV), or "bhsd_padP" / "bhsd_offE" (rows of D + P elements; views E elements into
    their buffers)."""
    vals = {"q": rounded(rng, (B, H, SQ, D), dtype), "k": rounded(rng, (B, HK, SK, D), dtype),
            "v": rounded(rng, (B, HK, SK, DV), dtype)}
    if layout == "bs3hd":
        assert H == HK and SQ == SK and D == DV
        buf = DevBuf(B * SQ * 3 * H * D, dtype)
        st = [SQ * 3 * H * D, D, 3 * H * D, 1]
        bufs = {n: (buf, buf.place(k * H * D, vals[n].shape, st, vals[n])) for k, n in enumerate("qkv")}
        buf.upload()
        return vals, bufs, {n: st for n in "qkv"}
    bufs, strides = {}, {}
    # "bhsd_padP": rows of D + P elements; "bhsd_offE": each tensor E elements into its buffer
    base, _, extra = layout.partition("_")
    pad = int(extra[3:]) if extra.startswith("pad") else 0
    off = int(extra[3:]) if extra.startswith("off") else 0
    for n, (h, s, d) in (("q", (H, SQ, D)), ("k", (HK, SK, D)), ("v", (HK, SK, DV))):
        st = strides_of(base, B, h, s, d + pad)
        buf = DevBuf(off + B * h * s * (d + pad), dtype)
        bufs[n] = (buf, buf.place(off, vals[n].shape, st, vals[n]))
        buf.upload()
        strides[n] = st
    return vals, bufs, strides


def out_buffer(dims, strides, dtype):
    buf = DevBuf(1 + sum((d - 1) * s for d, s in zip(dims, strides)), dtype)
    buf.place(0, dims, strides)
    return buf.upload()


def graph(dtype):
    dt = DTYPES[dtype][1]
    return cudnn.pygraph(io_data_type=dt, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT)


def fwd_graph(dtype, D, DV=None, SQ=5, SK=7, dropout=False, deselect=()):
    """A built B 1, H 2 BHSD forward graph (scale 0.5, Stats wanted, dropout 0.1 by pass-by-value seed / offset when
    asked) with its heuristic-A plans, ``deselect``'s engines barred: for the pick and refusal tests."""
    DV = D if DV is None else DV
    g = graph(dtype)

    def bhsd(s, d):
        return [2 * s * d, s * d, d, 1]
    q = g.tensor(name="q", dim=[1, 2, SQ, D], stride=bhsd(SQ, D))
    k = g.tensor(name="k", dim=[1, 2, SK, D], stride=bhsd(SK, D))
    v = g.tensor(name="v", dim=[1, 2, SK, DV], stride=bhsd(SK, DV))
    kw = {}
    if dropout:
        ts, to = (g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                           data_type=cudnn.data_type.INT64) for n in ("seed", "offset"))
        kw["dropout"] = (0.1, ts, to)
    o, s = g.sdpa(q, k, v, generate_stats=True, name="attn", attn_scale=0.5, **kw)
    o.set_output(True)
    s.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    if deselect:
        g.deselect_engines(list(deselect))
    return g


def int_tensor(g, name, values):
    a = np.asarray(values, np.int32).reshape(-1, 1, 1, 1)
    t = g.tensor(name=name, dim=list(a.shape), stride=[1, 1, 1, 1], data_type=cudnn.data_type.INT32)
    return t, cuda.to_device(a.reshape(-1))


def plans(g, every=True):
    """Plan indices to run: every built plan (build_plans(ALL)) or the heuristic's choice."""
    g.build_plans(cudnn.build_plan_policy.ALL if every else cudnn.build_plan_policy.HEURISTICS_CHOICE)
    n = g.get_execution_plan_count()
    return [i for i in range(n) if _built(g, i)] if every else [g.get_selected_plan_index()]


def _built(g, i):
    return i in getattr(g, "_built", {i: None})


def workspace(g, i):
    from ncudnn.memory import allocate
    n = g.get_workspace_size_plan_at_index(i)
    return allocate(n) if n else None
