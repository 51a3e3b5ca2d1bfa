"""Engine "softmax_fused": softmax / log-softmax forward and backward, recognized from the reduction +
pointwise pattern front ends lower it to, as ONE :mod:`ncudnn.kernels.softmax.axis` kernel (a row or
column kernel: one read of x, one write of y; online max/sum for long rows).

Patterns (tensors between the nodes virtual, each read only inside the pattern; ``r`` = the axes
where the reductions' outputs have extent 1):
  ACCURATE  m = MAX_r(x); d = x - m; e = exp(d); s = ADD_r(e); y = e / s
  FAST      e = exp(x); s = ADD_r(e); y = e / s               (computed max-shifted: same value)
  LOG       m = MAX_r(x); d = x - m; e = exp(d); s = ADD_r(e); y = d - log(s)
  BWD       p = dy * y; s = ADD_r(p); q = dy - s; dx = y * q
  LOG BWD   s = ADD_r(dy); t = exp(y) * s; dx = dy - t

Subgraph kind: ``"softmax"``, as ``ir.partition`` emits it (``ir/pattern_softmax.py``: the ACCURATE
and LOG forward patterns today). The engine re-checks the nodes with :func:`match`, which also knows
the FAST and backward patterns for when the partitioner emits them (until then those graphs run as
reduction + pointwise subgraphs on the "reduction" and "pointwise_fused" engines). Layout: x / y
(dy / dx) share strides and are packed; the reduced axes are consecutive in memory order, so the
tensor is an (outer, n, inner) view. Knobs: BLOCK_SIZE (0: the kernel layer's choice; rows of the
shared-memory path get the Step's dynamic shared memory); forward rows (inner == 1) also LOAD_SIZE
(16: the 16-byte vector kernel, when n divides into vectors and X / Y declare >= 16-byte alignment:
registers, or the online path for long rows -- never shared memory), TILE_ROWS (rows a warp-per-row
block, 0 = 4), ARRAY_SIZE_PER_THREAD (vectors in flight per thread on the vector online path,
0 = 4) and STAGES (with LOAD_SIZE 16: the persistent kernel, one block per SM looping over rows, a
row in registers; 1: rows loaded straight into registers, 2: the next row prefetched into shared
memory by cp.async while the current one is reduced and stored, 3: the next two rows, where two
fit in shared memory). The default config
(:func:`preferred_knobs`) takes the persistent kernel for forward rows too long for the
one-block-per-row register kernels that still fit a block's registers, the vector online path for
longer ones; the cost model ranks every other config 5% behind it. No workspace. Math in float32.
"""
import math

from ...kernels.softmax import axis as ksm
from ...types import (cudnnBackendKnobType_t, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO,
                     cudnnStatus_t)
from .. import heuristics as H
from ..base import OK, Config, Engine, KnobSpec
from ..membound.common import Arg, MemPlan, Step, kdtype, src_key, steps_time, tensor_bytes
from ..registry import register

S = cudnnStatus_t
K = cudnnBackendKnobType_t
BLOCKS = (0, 32, 128, 256, 512, 1024)
ROWS = (0, 1, 2, 4, 8)
UNROLLS = (0, 2, 4, 8)
STAGES = (0, 1, 2, 3)


# --------------------------------------------------------------------------- pattern (pure IR)

def _pw(n, mode):
    return n.OP == "pointwise" and int(n.mode) == int(mode)


def _red(n, mode):
    return n.OP == "reduction" and int(n.mode) == int(mode)


def _out(n):
    return next(iter(n.outputs.values()))


def _ins(n):
    ports, _ = n.operand_ports()
    return [n.inputs[p] for p in ports]


def match(nodes):
    """``(info, "")`` when ``nodes`` (topological order) are exactly one softmax pattern, else
    ``(None, reason)``. info: dict(kind "fwd" / "bwd", log, x, y (fwd) or y, dy, dx (bwd), stats dims)."""
    nodes = list(nodes)
    prod = {_out(n).uid: n for n in nodes}
    sink = [n for n in nodes if not any(_out(n).uid == t.uid for m in nodes for t in m.inputs.values())]
    if len(sink) != 1:
        return None, f"{len(sink)} nodes write results; a softmax pattern has one"
    last = sink[0]

    def src(t):
        return prod.get(t.uid)

    info = None
    a = _ins(last)
    if _pw(last, PM.CUDNN_POINTWISE_DIV) and len(a) == 2:
        e, s = a
        en, sn = src(e), src(s)
        if en is not None and _pw(en, PM.CUDNN_POINTWISE_EXP) and sn is not None and \
                _red(sn, RO.CUDNN_REDUCE_TENSOR_ADD) and sn.inputs["X"].uid == e.uid:
            d = _ins(en)[0]
            dn = src(d)
            if dn is None:                                           # FAST
                info = dict(kind="fwd", log=False, x=d, y=_out(last), stats=_out(sn).dims,
                            nodes={id(en), id(sn), id(last)})
            elif _pw(dn, PM.CUDNN_POINTWISE_SUB):                     # ACCURATE
                info = _shifted(dn, src, dict(kind="fwd", log=False, y=_out(last), stats=_out(sn).dims,
                                              nodes={id(dn), id(en), id(sn), id(last)}))
    elif _pw(last, PM.CUDNN_POINTWISE_SUB) and len(a) == 2:
        d, ls = a
        dn, lsn = src(d), src(ls)
        if lsn is not None and _pw(lsn, PM.CUDNN_POINTWISE_LOG) and dn is not None and \
                _pw(dn, PM.CUDNN_POINTWISE_SUB):                      # LOG forward
            sn = src(_ins(lsn)[0])
            en = src(sn.inputs["X"]) if sn is not None and _red(sn, RO.CUDNN_REDUCE_TENSOR_ADD) else None
            if en is not None and _pw(en, PM.CUDNN_POINTWISE_EXP) and _ins(en)[0].uid == d.uid:
                info = _shifted(dn, src, dict(kind="fwd", log=True, y=_out(last), stats=_out(sn).dims,
                                              nodes={id(dn), id(en), id(sn), id(lsn), id(last)}))
        elif dn is None and lsn is not None and _pw(lsn, PM.CUDNN_POINTWISE_MUL):   # LOG backward
            ey, s = _ins(lsn)
            eyn, sn = src(ey), src(s)
            if eyn is not None and _pw(eyn, PM.CUDNN_POINTWISE_EXP) and sn is not None and \
                    _red(sn, RO.CUDNN_REDUCE_TENSOR_ADD) and sn.inputs["X"].uid == d.uid and src(_ins(eyn)[0]) is None:
                info = dict(kind="bwd", log=True, y=_ins(eyn)[0], dy=d, dx=_out(last), stats=_out(sn).dims,
                            nodes={id(eyn), id(sn), id(lsn), id(last)})
    elif _pw(last, PM.CUDNN_POINTWISE_MUL) and len(a) == 2:           # softmax backward
        y, q = a
        qn = src(q)
        if qn is not None and _pw(qn, PM.CUDNN_POINTWISE_SUB) and src(y) is None:
            dy, s = _ins(qn)
            sn = src(s)
            pn = src(sn.inputs["X"]) if sn is not None and _red(sn, RO.CUDNN_REDUCE_TENSOR_ADD) else None
            if pn is not None and _pw(pn, PM.CUDNN_POINTWISE_MUL) and src(dy) is None and \
                    {t.uid for t in _ins(pn)} == {dy.uid, y.uid}:
                info = dict(kind="bwd", log=False, y=y, dy=dy, dx=_out(last), stats=_out(sn).dims,
                            nodes={id(pn), id(sn), id(qn), id(last)})
    if info is None:
        return None, "the nodes are not a softmax / log-softmax forward or backward pattern"
    if info["nodes"] != {id(n) for n in nodes}:
        return None, "the subgraph holds nodes outside the softmax pattern"
    out_uid = (info["y"] if info["kind"] == "fwd" else info["dx"]).uid
    for n in nodes:
        t = _out(n)
        if t.uid != out_uid and not t.is_virtual:
            return None, f"intermediate {t.label} is not virtual (the fused kernel does not write it)"
    return info, ""


def _shifted(dn, src, info):
    """Complete ``info`` from d = x - m with m = MAX_r(x)."""
    x, m = _ins(dn)
    mn = src(m)
    if mn is None or not _red(mn, RO.CUDNN_REDUCE_TENSOR_MAX) or mn.inputs["X"].uid != x.uid or src(x) is not None:
        return None
    if tuple(_out(mn).dims) != tuple(info["stats"]):
        return None
    info.update(x=x)
    info["nodes"] = info["nodes"] | {id(mn)}
    return info


def geometry(info):
    """(outer, n, inner) of the pattern's tensors, or (None, reason)."""
    ref = info["x"] if info["kind"] == "fwd" else info["y"]
    others = [info["y"]] if info["kind"] == "fwd" else [info["dy"], info["dx"]]
    for t in others:
        if tuple(t.strides) != tuple(ref.strides) or tuple(t.dims) != tuple(ref.dims):
            return None, f"{t.label}: dims/strides differ from {ref.label}'s"
    if not ref.is_packed():
        return None, f"{ref.label}: strides {ref.strides} are not packed"
    if any(info["stats"][d] not in (1, ref.dims[d]) for d in range(ref.ndim)):
        return None, f"statistics dims {info['stats']} are not a reduction of {ref.dims}"
    order = [d for d in ref.stride_order() if ref.dims[d] != 1]   # outermost -> innermost
    idx = [k for k, d in enumerate(order) if info["stats"][d] == 1]
    if not idx or idx != list(range(idx[0], idx[-1] + 1)):
        return None, f"the reduced axes of {ref.label} are not consecutive in memory order"
    outer = math.prod(ref.dims[d] for d in order[:idx[0]])
    n = math.prod(ref.dims[order[k]] for k in idx)
    inner = math.prod(ref.dims[d] for d in order[idx[-1] + 1:])
    return (outer, n, inner), ""


# --------------------------------------------------------------------------------------- engine

def _block(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0)


def _load(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0)


def _rows(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0)


def _unroll(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, 0)


def _stages(cfg):
    return cfg.get(K.CUDNN_KNOB_TYPE_STAGES, 0)


#: long forward rows (not in registers on the scalar kernel): the vector online path with this many
#: threads and vectors in flight per thread (on the H200 faster than torch where the shared-memory row
#: kernel was slower; dev/perf_notes.md, "Softmax")
LONG_BLOCK, LONG_UNROLL = 512, 8
#: long forward rows that fit a block's registers: the persistent kernel with these threads (0: the
#: kernel layer's choice, 1024 for FP32 32768) and stages (1: rows loaded straight into registers): the
#: fastest of the persistent variants and of the online path on the H200 (experiments/probe_softmax.py;
#: dev/perf_notes.md, "Softmax")
PERSIST_BLOCK, PERSIST_STAGES = 0, 1


def preferred_knobs(sub):
    """(BLOCK_SIZE, LOAD_SIZE, TILE_ROWS, ARRAY_SIZE_PER_THREAD, STAGES) of the default config:
    forward rows that take 16-byte accesses and are too long for the one-block-per-row register
    kernels run the persistent kernel (PERSIST_BLOCK, PERSIST_STAGES) where the row fits a block's
    registers, else the vector online path (LONG_BLOCK threads, LONG_UNROLL vectors of 4 in flight);
    every other problem (rows in registers, e.g. 1024, columns, backward, no vectors) the kernel
    layer's choice, all knobs 0."""
    vg = _vec_geometry(sub)
    if vg is None:
        return 0, 0, 0, 0, 0
    _, n, vec = vg
    if ksm.softmax_config(n)[2] or ksm.softmax_vec_config(n, vec, LONG_BLOCK)[2]:
        return 0, 0, 0, 0, 0
    if _persist_fits(sub, PERSIST_BLOCK, PERSIST_STAGES):
        return PERSIST_BLOCK, 16, 0, 0, PERSIST_STAGES
    # the same 128 bytes in flight a thread for 16-bit I/O (8 vectors of 8 spilled 184 bytes on sm_90)
    return LONG_BLOCK, 16, 0, LONG_UNROLL * 4 // vec, 0


def _persist_fits(sub, block, stages):
    """The persistent kernel takes this forward row softmax with ``block`` threads (0: its choice):
    16-byte vectors, the row in the block's registers, and ``stages - 1`` rows in shared memory."""
    rv = _row_vec(sub)
    if rv is None:
        return False
    _, n, _, sx, sy = rv
    return ksm.persist_ok(n, [sx, sy], sx, block, prefetch=max(0, stages - 1))


def _vec_geometry(sub):
    """(outer, n, vec) of a forward row softmax that can take 16-byte accesses, else None."""
    rv = _row_vec(sub)
    return None if rv is None else rv[:3]


_LAST_ROW_VEC = (None, None)    # (subgraph, _row_vec answer): a ranking asks about one subgraph many times


def _row_vec(sub):
    """(outer, n, vec, x itemsize, y itemsize) of a forward row softmax that can take 16-byte accesses
    (storage itemsizes), else None; the last subgraph's answer is remembered."""
    global _LAST_ROW_VEC
    last = _LAST_ROW_VEC
    if last[0] is sub:
        return last[1]
    out = None
    info, _ = match(sub.nodes)
    geo = geometry(info)[0] if info is not None and info["kind"] == "fwd" else None
    if geo is not None and geo[2] == 1:
        outer, n, _ = geo
        x, y = info["x"], info["y"]
        sizes = [storage_itemsize(kdtype(t)) for t in (x, y)]
        vec = 16 // max(sizes)
        if min(x.alignment, y.alignment) >= 16 and ksm.vec_ok(n, sizes, vec):
            out = (outer, n, vec, sizes[0], sizes[1])
    _LAST_ROW_VEC = (sub, out)
    return out


def storage_itemsize(dt):
    from ...kernels.runtime.dtypes import storage_dtype
    return storage_dtype(dt).itemsize


@register
class SoftmaxFusedEngine(Engine):
    name = "softmax_fused"
    kinds = ("softmax",)
    _last_bytes = None
    _last_default = None

    def check_support(self, sub, ctx):
        st, why = super().check_support(sub, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        info, why = match(sub.nodes)
        if info is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{self.name}: {why}"
        geo, why = geometry(info)
        if geo is None:
            return S.CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, f"{self.name}: {why}"
        for k in ("x", "y", "dy", "dx"):
            t = info.get(k)
            if t is not None and kdtype(t) not in ("float32", "float16", "bfloat16", "float64"):
                return S.CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, f"{self.name}: {t.label}: {t.dtype.name}"
        return OK

    def knobs(self, sub):
        return (KnobSpec(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, 0, 1024, 32, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_LOAD_SIZE, 0, 16, 16, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_TILE_ROWS, 0, 8, 1, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, 0, 8, 2, 0),
                KnobSpec(K.CUDNN_KNOB_TYPE_STAGES, 0, 3, 1, 0))

    def configs(self, sub, ctx):
        """The search space in the knobs' order (as the base class enumerates it), with each knob only
        over the values :meth:`keep` accepts (BLOCKS, ROWS, UNROLLS, STAGES): the same list, 1/12 the
        keep calls."""
        values = {K.CUDNN_KNOB_TYPE_BLOCK_SIZE: BLOCKS, K.CUDNN_KNOB_TYPE_TILE_ROWS: ROWS,
                  K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD: UNROLLS, K.CUDNN_KNOB_TYPE_STAGES: STAGES}
        out = [Config(self.name, ())]
        for spec in self.knobs(sub):
            vals = sorted(values.get(spec.type, spec.values()))
            out = [c.with_knob(spec.type, v) for c in out for v in vals]
        return [c for c in out if self.keep(sub, c, ctx)[0] == S.CUDNN_STATUS_SUCCESS]

    def keep(self, sub, cfg, ctx):
        st, why = super().keep(sub, cfg, ctx)
        if st != S.CUDNN_STATUS_SUCCESS:
            return st, why
        no = S.CUDNN_STATUS_NOT_SUPPORTED
        if _block(cfg) not in BLOCKS:
            return no, f"{self.name}: BLOCK_SIZE {_block(cfg)} is not one of {BLOCKS}"
        if _rows(cfg) not in ROWS:
            return no, f"{self.name}: TILE_ROWS {_rows(cfg)} is not one of {ROWS}"
        if _unroll(cfg) not in UNROLLS:
            return no, f"{self.name}: ARRAY_SIZE_PER_THREAD {_unroll(cfg)} is not one of {UNROLLS}"
        if _stages(cfg) not in STAGES:
            return no, f"{self.name}: STAGES {_stages(cfg)} is not one of {STAGES}"
        if not (_load(cfg) or _rows(cfg) or _unroll(cfg) or _stages(cfg)):
            return OK
        if _stages(cfg):
            if _load(cfg) != 16 or _vec_geometry(sub) is None:
                return no, f"{self.name}: STAGES {_stages(cfg)} selects the persistent kernel: LOAD_SIZE 16, a " \
                    "forward over the innermost axis, n a multiple of one vector, X and Y >= 16-byte aligned"
            if _rows(cfg) or _unroll(cfg):
                return no, f"{self.name}: TILE_ROWS / ARRAY_SIZE_PER_THREAD are not knobs of the persistent kernel " \
                    "(STAGES > 0)"
            if not _persist_fits(sub, _block(cfg), _stages(cfg)):
                return no, f"{self.name}: STAGES {_stages(cfg)}: a row does not fit the persistent kernel with " \
                    f"BLOCK_SIZE {_block(cfg)} (whole warps, 64..1024 threads, <= 32 values a thread at 1024 " \
                    f"threads, <= 64 below; STAGES - 1 rows in <= {ksm.PERSIST_SMEM_MAX} bytes of shared memory)"
            return OK
        vg = _vec_geometry(sub)
        if not _load(cfg) or vg is None:
            return no, f"{self.name}: LOAD_SIZE / TILE_ROWS / ARRAY_SIZE_PER_THREAD select the 16-byte vector " \
                "kernel: a forward over the innermost axis, n a multiple of one vector, X and Y >= 16-byte aligned"
        _, blk, vpt, _ = ksm.softmax_vec_config(vg[1], vg[2], _block(cfg))
        if _rows(cfg) and blk != 32:
            return no, f"{self.name}: TILE_ROWS {_rows(cfg)} needs warp-per-row mode (BLOCK_SIZE 32, or 0 with " \
                f"rows of <= {ksm.WARP_ROW_MAX} elements)"
        if _unroll(cfg) and vpt:
            return no, f"{self.name}: ARRAY_SIZE_PER_THREAD is for rows too long for registers (the online path)"
        return OK

    def default_config(self, sub):
        """The heuristic's first config: :func:`preferred_knobs`."""
        last = self._last_default               # (subgraph, config): a ranking asks for one subgraph's
        if last is not None and last[0] is sub:
            return last[1]
        if sub is None:                         # the knob space alone: every knob 0
            return super().default_config(sub)
        b, l, r, u, st = preferred_knobs(sub)
        cfg = super().default_config(sub).with_knob(K.CUDNN_KNOB_TYPE_BLOCK_SIZE, b) \
            .with_knob(K.CUDNN_KNOB_TYPE_LOAD_SIZE, l).with_knob(K.CUDNN_KNOB_TYPE_TILE_ROWS, r) \
            .with_knob(K.CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD, u).with_knob(K.CUDNN_KNOB_TYPE_STAGES, st)
        self._last_default = (sub, cfg)
        return cfg

    def candidates_key(self, sub):
        vg = _vec_geometry(sub)
        if vg is None:
            return ()
        _, n, vec = vg
        return (n <= ksm.WARP_ROW_MAX, ksm.softmax_vec_config(n, vec)[2] > 0,
                ksm.softmax_vec_config(n, vec, 32)[2] > 0, ksm.softmax_vec_config(n, vec, 1024)[2] > 0,
                preferred_knobs(sub), tuple(_persist_fits(sub, b, st) for b in BLOCKS for st in STAGES[1:]))

    def _off(self, sub, cfg):
        """5% more for every config other than the default: the measured-best default ranks first."""
        return 1.0 if cfg.knobs == self.default_config(sub).knobs else 1.05

    def _step(self, sub, cfg):
        info, _ = match(sub.nodes)
        (outer, n, inner), _ = geometry(info)
        block = _block(cfg)
        if info["kind"] == "fwd" and _stages(cfg):
            x, y = info["x"], info["y"]
            fargs = (n, info["log"], _vec_geometry(sub)[2], block, _stages(cfg) - 1, kdtype(x), kdtype(y))
            _, threads, shared, _ = ksm.persist_kernel(*fargs)
            return Step("softmax_persist:" + src_key(fargs), lambda: ksm.persist_kernel(*fargs)[0],
                        ksm.persist_grid(outer), threads, [Arg.tensor(x), Arg.tensor(y), Arg.const(outer)],
                        shared=shared, nbytes=tensor_bytes(x, y))
        if info["kind"] == "fwd" and _load(cfg):
            x, y = info["x"], info["y"]
            vec = _vec_geometry(sub)[2]
            fargs = (outer, n, info["log"], vec, block, _rows(cfg), _unroll(cfg) or 4, kdtype(x), kdtype(y))
            _, (grid, threads, _), _ = ksm.fwd_vec_kernel(*fargs)
            return Step("softmax_fwd_vec:" + src_key(fargs), lambda: ksm.fwd_vec_kernel(*fargs)[0], grid, threads,
                        [Arg.tensor(x), Arg.tensor(y), Arg.const(outer)], nbytes=tensor_bytes(x, y))
        if info["kind"] == "fwd":
            x, y = info["x"], info["y"]
            fargs = (outer, n, inner, info["log"], block, kdtype(x), kdtype(y))
            _, (grid, threads, shared), _ = ksm._fwd_kernel(*fargs)
            return Step("softmax_fwd:" + src_key(fargs), lambda: ksm._fwd_kernel(*fargs)[0], grid, threads,
                        [Arg.tensor(x), Arg.tensor(y), Arg.const(outer)], shared=shared, nbytes=tensor_bytes(x, y))
        y, dy, dx = info["y"], info["dy"], info["dx"]
        fargs = (outer, n, inner, info["log"], block, kdtype(y), kdtype(dy), kdtype(dx))
        _, (grid, threads, _), _ = ksm._bwd_kernel(*fargs)
        return Step("softmax_bwd:" + src_key(fargs), lambda: ksm._bwd_kernel(*fargs)[0], grid, threads,
                    [Arg.tensor(y), Arg.tensor(dy), Arg.tensor(dx), Arg.const(outer)], nbytes=tensor_bytes(y, dy, dx))

    def cost(self, sub, cfg, device):
        """Bytes over bandwidth of the one kernel (the Step's timing uses its ``nbytes`` only), from the
        pattern's tensors alone: no kernel source is generated; 5% more for a config other than
        :meth:`default_config`."""
        last = self._last_bytes                  # (subgraph, bytes): a ranking costs one subgraph's configs
        if last is not None and last[0] is sub:
            nbytes = last[1]
        else:
            info, _ = match(sub.nodes)
            ts = (info["x"], info["y"]) if info["kind"] == "fwd" else (info["y"], info["dy"], info["dx"])
            nbytes = tensor_bytes(*ts)
            self._last_bytes = (sub, nbytes)
        t = H.kernel_time(device, flops=nbytes * 2.0, nbytes=nbytes, threads=256, regs=40, launches=1)
        return t * self._off(sub, cfg)

    def cost_plain(self, sub, cfg, device):
        """The cost through the built Step (generates the kernel source): what :meth:`cost` equals."""
        return steps_time(device, [self._step(sub, cfg)], flops_per_byte=2.0) * self._off(sub, cfg)

    def build(self, sub, cfg, ctx):
        return MemPlan(self, sub, cfg, [self._step(sub, cfg)], 0)
