"""How every legacy call runs: build an IR graph, pick an engine config, build (cached) and execute.

A call describes its graph with a :class:`Builder` (external tensors bound to the caller's buffers,
virtual tensors, by-value scalars, scratch tensors living in a legacy-owned buffer) and hands it to
:func:`run`. Lowered graphs and their plans are cached per handle under a key the call computes
from its descriptors, so a repeated call does no graph work.

Blending (``y = alpha * op(x) + beta * y``, every legacy op): :meth:`Builder.blend` appends it after
the op's result as pointwise nodes: alpha is a by-value scalar multiply (left out when alpha == 1),
beta an ADD of the prior output with ``alpha2 = beta`` (left out when beta == 0, so y is never
read). The prior output is a separate uid bound to the same buffer as the output.

When no engine runs a part of the graph the call fails with NOT_SUPPORTED and a message naming
the op that has no engine (``no_engine_reason``): this is how ops whose engines have not landed
report themselves.
"""
import os
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from .. import memory
from ..engines import api
from ..errors import BadParamError, NotSupportedError
from ..handle import get_handle_or_raise
from ..ir import OpGraph, Pointwise, TensorDesc
from ..ir.tensor import packed_strides
from ..types import cudnnBackendHeurMode_t, cudnnDataType_t, cudnnMathType_t, cudnnPointwiseMode_t, cudnnStatus_t
from ._util import optional_ptrs, size_arg

S = cudnnStatus_t
DT = cudnnDataType_t
PM = cudnnPointwiseMode_t
HM = cudnnBackendHeurMode_t
CACHE_SIZE = 256


class Builder:
    """Collects the nodes and tensors of one legacy call's graph."""

    def __init__(self, unfused=False):
        self.unfused = unfused  # anchor outputs in buffers: each op its own subgraph (see anchor_out)
        self.anchors = 0
        self.nodes = []
        self.ext = {}       # name -> TensorDesc bound to a caller buffer
        self.scalars = {}   # name -> by-value TensorDesc
        self.scratch = {}   # name -> TensorDesc bound to a legacy-owned buffer
        self.constants = {}  # name -> host array a scratch buffer is filled with once
        self._uid = 0

    def _next(self):
        self._uid += 1
        return self._uid

    def tensor(self, name, desc, **reshape):
        """An external tensor from a Tensor/Filter descriptor, bound at run time to ``bind[name]``."""
        t = desc.ir(self._next(), name, **reshape)
        self.ext[name] = t
        return t

    def raw(self, name, dims, strides, dtype):
        t = TensorDesc(self._next(), dims=tuple(dims), strides=tuple(strides), dtype=dtype, name=name)
        self.ext[name] = t
        return t

    def virtual(self, name="", dims=None, strides=None, dtype=None):
        if dims is not None and strides is None:
            strides = packed_strides(dims)
        return TensorDesc(self._next(), dims=dims, strides=strides, dtype=dtype, is_virtual=True, name=name)

    def anchor_out(self, name, dims, dtype=DT.CUDNN_DATA_FLOAT):
        """The output of an anchor op (convolution, normalization) that pointwise nodes consume: virtual,
        so engines can fuse them as an epilogue; a scratch buffer in the unfused variant of the graph,
        which :func:`choose` falls back to when no engine takes the fused epilogue."""
        self.anchors += 1
        if self.unfused:
            return self.scratch_tensor(name, dims, packed_strides(dims), dtype)
        return self.virtual(name, dims=dims, dtype=dtype)

    def scratch_tensor(self, name, dims, strides, dtype):
        t = TensorDesc(self._next(), dims=tuple(dims), strides=tuple(strides), dtype=dtype, name=name)
        self.scratch[name] = t
        return t

    def constant(self, name, array, dtype):
        """A scratch tensor holding ``array`` (packed, cast to ``dtype``): e.g. a fixed filter."""
        t = self.scratch_tensor(name, array.shape, packed_strides(array.shape), dtype)
        self.constants[name] = np.ascontiguousarray(array, dtype=memory.numpy_dtype(dtype))
        return t

    def scalar(self, name, rank, dtype=DT.CUDNN_DATA_FLOAT, value=0.0):
        t = TensorDesc(self._next(), dims=(1,) * rank, strides=(1,) * rank, dtype=dtype, is_by_value=True,
                       value=value, name=name)
        self.scalars[name] = t
        return t

    def add(self, node):
        self.nodes.append(node)
        return node

    def pw(self, mode, out, name="", **ports_and_attrs):
        """A pointwise node ``out = mode(X[, B])``; attributes pass through."""
        ports = {p: ports_and_attrs.pop(p) for p in ("X", "B", "T", "DY") if p in ports_and_attrs}
        out_port = "DX" if "DY" in ports else "Y"
        return self.add(Pointwise(name or PM(mode).name.lower(), ports, {out_port: out}, mode=mode,
                                  **ports_and_attrs))

    def blend(self, result, y_name, y_desc, alpha, beta, scalar_dtype=DT.CUDNN_DATA_FLOAT, **reshape):
        """Write ``alpha * result + beta * y_prior`` into external ``y_name``; returns the output tensor.

        ``result`` is a tensor made by the op (virtual) or None, in which case the op should write
        straight into the returned tensor (only when alpha == 1 and beta == 0: check
        :func:`needs_blend` first).
        """
        y = self.tensor(y_name, y_desc, **reshape)
        if result is None:
            return y
        rank = len(y.dims)
        cur = result
        if alpha != 1.0:
            a = self.scalar("alpha:" + y_name, rank, scalar_dtype)
            nxt = y if beta == 0.0 else self.virtual(f"{y_name}*alpha")
            self.pw(PM.CUDNN_POINTWISE_MUL, nxt, f"alpha_{y_name}", X=cur, B=a)
            cur = nxt
        if beta != 0.0:
            prior = self.tensor(y_name + ":prior", y_desc, **reshape)
            self.pw(PM.CUDNN_POINTWISE_ADD, y, f"beta_{y_name}", X=cur, B=prior, alpha2=beta)
        elif cur is result:
            self.pw(PM.CUDNN_POINTWISE_IDENTITY, y, f"copy_{y_name}", X=cur)
        return y


def needs_blend(alpha, beta):
    return alpha != 1.0 or beta != 0.0


def blend_key(alpha, beta):
    """The part of a cache key that blending decides: alpha is a runtime scalar, beta a constant."""
    return (alpha != 1.0, beta)


def scalar_dtype(dtype):
    """cuDNN's scaling-factor type for tensors of ``dtype``: double for double data, else float."""
    return DT.CUDNN_DATA_DOUBLE if dtype == DT.CUDNN_DATA_DOUBLE else DT.CUDNN_DATA_FLOAT


def build_context(h, math_type=None):
    """The engine BuildContext of handle ``h`` under a cudnnMathType_t. FMA_MATH: no tensor cores, no TF32.
    TENSOR_OP_MATH and TENSOR_OP_MATH_ALLOW_CONVERSION: tensor cores, FP32 inputs as TF32 (cuDNN documents
    NVIDIA_TF32_OVERRIDE=0 as disabling "the TF32 behaviour of DEFAULT_MATH and the other Tensor Core math
    types"). DEFAULT_MATH: tensor cores for 16-bit data, FP32 stays FP32-exact for now: cuDNN's DEFAULT_MATH
    permits TF32 on A100 and newer, a default switch issue #27 has not made yet. NVIDIA_TF32_OVERRIDE=0
    bars TF32 under every math type."""
    ctx = api.context(h)
    if math_type is None:
        return ctx
    mt = cudnnMathType_t(int(math_type))
    if mt == cudnnMathType_t.CUDNN_FMA_MATH:
        return replace(ctx, allow_tensor_cores=False, allow_tf32=False)
    tf32 = mt != cudnnMathType_t.CUDNN_DEFAULT_MATH and os.environ.get("NVIDIA_TF32_OVERRIDE") != "0"
    return replace(ctx, allow_tensor_cores=True, allow_tf32=tf32)


class Lowered:
    """A finalized graph of one legacy call, with its chosen config and plan (built lazily), and how to
    rebuild it unfused."""

    def __init__(self, builder, graph, ctx, build=None, key=None):
        self.builder, self.graph, self.ctx = builder, graph, ctx
        self.build, self.key = build, key
        self.plan = None
        self.plan_low = None
        self.scratch_bufs = None
        self._alt = False

    def unfused(self):
        """The same call with every anchor output in a buffer (None when the graph has no anchor
        feeding pointwise nodes)."""
        if self._alt is False:
            self._alt = None
            if self.builder.anchors and self.build is not None and not self.builder.unfused:
                self._alt = _make(self.build, self.key, self.ctx, unfused=True)
        return self._alt


def _cache(h):
    c = h.caches.get("legacy")
    if c is None:
        c = h.caches["legacy"] = OrderedDict()
    return c


def _make(build, key, ctx, unfused=False):
    b = Builder(unfused)
    build(b)
    graph = OpGraph(b.nodes, name=f"legacy:{key[0]}")
    graph.finalize()
    return Lowered(b, graph, ctx, build, key)


def lower(h, key, build, ctx=None):
    """The cached :class:`Lowered` for ``key`` on handle ``h``; ``build(builder)`` fills a new one.

    IR errors (shape mismatches, bad attributes) raise with their documented status.
    """
    cache = _cache(h)
    low = cache.get(key)
    if low is not None:
        cache.move_to_end(key)
        return low
    low = _make(build, key, ctx if ctx is not None else api.context(h))
    cache[key] = low
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
    return low


def heuristics(low):
    return api.get_heuristics(low.graph, HM.CUDNN_HEUR_MODE_A, low.ctx)


def no_engine_reason(graph, ctx):
    """Which part of ``graph`` no registered engine runs, and what each engine said
    (:func:`ncudnn.engines.api.explain_unsupported`, by partition part)."""
    return api.explain_unsupported(graph, ctx).by_part


def choose(low):
    """(EngineConfig, Lowered) to run: the heuristics' best on the graph, else on its unfused variant;
    NOT_SUPPORTED naming the missing engine when neither has one."""
    configs = heuristics(low)
    if configs:
        return configs[0], low
    alt = low.unfused()
    if alt is not None:
        configs = heuristics(alt)
        if configs:
            return configs[0], alt
    raise NotSupportedError(no_engine_reason((alt or low).graph, low.ctx), S.CUDNN_STATUS_NOT_SUPPORTED)


def plan_of(low, ec=None, ec_low=None):
    """(plan, the Lowered it runs): the chosen config's (cached), or ``ec``'s on ``ec_low``."""
    if ec is None:
        if low.plan is None:
            ec, used = choose(low)
            low.plan, low.plan_low = api.build_plan(used.graph, ec, used.ctx), used
        return low.plan, low.plan_low
    used = ec_low or low
    return api.build_plan(used.graph, ec, used.ctx), used


def _scratch(low):
    """Buffers of the graph's scratch tensors (allocated once per lowered graph)."""
    if low.scratch_bufs is None:
        bufs = {name: memory.allocate(max(t.nbytes_needed(), 1)) for name, t in low.builder.scratch.items()}
        for name, host in low.builder.constants.items():
            view = bufs[name]
            memory.to_numba(view, shape=host.shape, dtype=host.dtype).copy_to_device(host)
        low.scratch_bufs = bufs
    return low.scratch_bufs


def pack_of(low, bind, scalars=None):
    """The variant pack: uid -> caller buffer for each external tensor (``bind[name]``; a
    ``name:prior`` tensor takes ``name``'s buffer), scratch buffers, by-value scalars."""
    b = low.builder
    pack = {}
    for name, t in b.ext.items():
        src = bind.get(name.split(":", 1)[0]) if name not in bind else bind[name]
        if src is None:
            raise BadParamError(f"{name} is NULL", S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        pack[t.uid] = src
    for name, buf in _scratch(low).items():
        pack[b.scratch[name].uid] = buf
    for name, t in b.scalars.items():
        v = (scalars or {}).get(name)
        if v is None:
            v = (scalars or {}).get(name.split(":", 1)[0])
        pack[t.uid] = t.value if v is None else v
    return pack


def execute(h, low, bind, scalars=None, workspace=None, workspace_size=None, plan=None):
    """Run ``low`` on the caller's buffers (``plan``: a (plan, Lowered) from :func:`plan_of`).

    ``workspace_size`` not None: the call has a caller workspace (``workspace``, possibly NULL); it
    must hold the engines' scratch (else BAD_PARAM_SIZE_INSUFFICIENT). Intermediates a blended graph
    materializes beyond that come from the handle's pool, as does everything for calls without one.
    """
    plan, low = plan or plan_of(low)
    pack = pack_of(low, bind, scalars)
    need = plan.workspace_size
    ws = None
    if workspace_size is not None:
        optional_ptrs(workSpace=workspace)
        size_arg(workspace_size, "workSpaceSizeInBytes")
    if need and workspace_size is not None:
        size = size_arg(workspace_size, "workSpaceSizeInBytes") if workspace is not None else 0
        scratch = (plan.scratch_size + 255) // 256 * 256
        if size >= need:
            ws = workspace
        elif size < scratch:
            raise BadParamError(f"workSpaceSizeInBytes = {size}{' (workSpace is NULL)' if workspace is None else ''}, "
                                f"this algorithm needs {scratch} bytes", S.CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    if need and ws is None:
        ws = h.workspace_view(need)
    api.execute(plan, pack, ws, handle=h)


def run(handle, key, build, bind, scalars=None, ctx=None):
    """lower + execute for calls without a caller workspace; returns the Lowered."""
    h = get_handle_or_raise(handle)
    low = lower(h, key, build, ctx)
    execute(h, low, bind, scalars)
    return low

