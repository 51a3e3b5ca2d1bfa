"""``scaled_dot_product_attention``: cudnn-frontend's experimental SDPA entry point, on pygraph's ``sdpa``.

Signature and meaning as ``cudnn.experimental.ops.scaled_dot_product_attention`` (which follows
``torch.nn.functional.scaled_dot_product_attention``): BHSD tensors (batch, heads, sequence, head dim);
``scale`` defaults to 1/sqrt(D); ``is_causal`` is a causal mask (right bound 0); ``enable_gqa`` allows
fewer K/V heads than Q heads; the cuDNN extensions ``diagonal_alignment`` (0 top-left, 1 bottom-right),
``left_bound`` / ``right_bound`` (a diagonal band, -1 = none) and ``seq_len_q`` / ``seq_len_kv`` (INT32
(B, 1, 1, 1) lengths: a padding mask). One graph is built per call signature (shapes, strides, data
type, options) and kept (the last :data:`KEPT`); each call executes it.

Where it differs from cudnn-frontend's, said rather than hidden:

* any device arrays pygraph takes are accepted (torch, CuPy, numba, ``__cuda_array_interface__``); the
  output is allocated like ``query`` (``torch.empty_strided`` for torch, a device array otherwise), BHSD
  packed;
* it is a function, not a registered torch custom op, and it has no autograd: with gradients on and an
  input that requires them it refuses (NOT_SUPPORTED) rather than return an output that silently cuts the
  gradient; build training graphs with pygraph's ``sdpa`` / ``sdpa_backward``;
* ``attn_mask`` and ``dropout_p`` are refused, as cudnn-frontend's refuses them (NOT_SUPPORTED: a
  RuntimeError, as the frontend's NotImplementedError is); so are ``cumulative_seq_len_q`` / ``_kv``
  (ragged tensors), which ncudnn's attention does not run.
"""
import math
from collections import OrderedDict

from ...frontend.core import pygraph
from ...frontend.enums import data_type, heur_mode
from ...frontend.errors import graph_error
from ...frontend.sugar import _alloc_like
from ...frontend.values import describe_array
from ...ir.tensor import packed_strides
from ...types import cudnnStatus_t

S = cudnnStatus_t
#: graphs kept, one per call signature (least recently used dropped first)
KEPT = 64
_GRAPHS = OrderedDict()


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, diagonal_alignment=0, left_bound=-1, right_bound=-1,
                                 seq_len_q=None, seq_len_kv=None, cumulative_seq_len_q=None,
                                 cumulative_seq_len_kv=None):
    """Attention output ``softmax(scale * Q K^T [masked]) V`` of BHSD ``query`` (B, H_q, S_q, D), ``key``
    (B, H_k, S_kv, D), ``value`` (B, H_k, S_kv, D_v): a new (B, H_q, S_q, D_v) array of query's type."""
    where = "experimental.ops.scaled_dot_product_attention"
    for name, v in (("attn_mask", attn_mask), ("cumulative_seq_len_q", cumulative_seq_len_q),
                    ("cumulative_seq_len_kv", cumulative_seq_len_kv)):
        if v is not None:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {name} is not supported")
    if dropout_p:
        raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: dropout_p={dropout_p!r} is not supported "
                          "(pygraph's sdpa takes dropout=(probability, seed, offset))")
    _refuse_autograd(where, query=query, key=key, value=value)
    arrays = {"query": query, "key": key, "value": value, "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
    described = {n: describe_array(a) for n, a in arrays.items() if a is not None}
    for n in ("query", "key", "value"):
        if len(described[n][0]) != 4:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{where}: {n} has dims {described[n][0]}; BHSD "
                              "(batch, heads, sequence, head dim) tensors are rank 4")
    (b, hq, sq, d), hk = described["query"][0], described["key"][0][1]
    if not enable_gqa and hq != hk:
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{where}: query has {hq} heads, key has {hk}: set "
                          "enable_gqa=True for grouped-query attention")
    if int(diagonal_alignment) not in (0, 1):
        raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"{where}: diagonal_alignment {diagonal_alignment!r} is "
                          "not 0 (top-left) or 1 (bottom-right)")
    attn_scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    lb = int(left_bound) if left_bound is not None and int(left_bound) >= 0 else None
    rb = int(right_bound) if right_bound is not None and int(right_bound) >= 0 else None
    if is_causal and rb is None:
        rb = 0
    options = (attn_scale, lb, rb, int(diagonal_alignment))
    key_ = (tuple((n, tuple(x[0]), tuple(x[1]), None if x[2] is None else int(x[2])) for n, x in described.items()),
            options, str(getattr(query, "device", "")))
    entry = _GRAPHS.get(key_)
    if entry is None:
        entry = _build(described, options)
        _GRAPHS[key_] = entry
        while len(_GRAPHS) > KEPT:
            _GRAPHS.popitem(last=False)
    else:
        _GRAPHS.move_to_end(key_)
    g, tensors, o_t = entry
    out = _alloc_like(o_t, like=query)
    pack = {t: arrays[n] for n, t in tensors.items()}
    pack[o_t] = out
    g.execute(pack, _workspace(g.get_workspace_size(), query), handle=_handle(query))
    return out


def _build(described, options):
    """(graph, {argument name: tensor}, output tensor) of one call signature, built."""
    attn_scale, lb, rb, alignment = options
    io = described["query"][2]
    g = pygraph(name="experimental_sdpa", io_data_type=io, intermediate_data_type=data_type.FLOAT,
                compute_data_type=data_type.FLOAT)
    tensors = {n: g.tensor(name=n, dim=dims, stride=strides, data_type=dt)
               for n, (dims, strides, dt, _) in described.items()}
    padded = "seq_len_q" in tensors or "seq_len_kv" in tensors
    o, _ = g.sdpa(tensors["query"], tensors["key"], tensors["value"], attn_scale=attn_scale, generate_stats=False,
                  use_padding_mask=padded, seq_len_q=tensors.get("seq_len_q"), seq_len_kv=tensors.get("seq_len_kv"),
                  diagonal_alignment=alignment, diagonal_band_left_bound=lb, diagonal_band_right_bound=rb,
                  name="sdpa")
    b, hq, sq, _ = described["query"][0]
    dims = [b, hq, sq, described["value"][0][3]]
    o.set_output(True).set_dim(dims).set_stride(list(packed_strides(dims))).set_data_type(io)
    g.build([heur_mode.A, heur_mode.FALLBACK])
    return g, tensors, o


def _refuse_autograd(where, **arrays):
    for name, a in arrays.items():
        if getattr(a, "requires_grad", False) and type(a).__module__.startswith("torch"):
            import torch

            if torch.is_grad_enabled():
                raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"{where}: {name} requires grad, and this entry "
                                  "point has no autograd (use pygraph sdpa / sdpa_backward, or torch.no_grad())")


def _workspace(nbytes, like):
    if not nbytes:
        return None
    if type(like).__module__.startswith("torch"):
        import torch

        return torch.empty(nbytes, dtype=torch.uint8, device=like.device)
    from ...memory import allocate

    return allocate(nbytes)


_HANDLES = {}


def _handle(like):
    """For torch inputs on a GPU, a handle per device on torch's current stream (as cudnn-frontend's
    does); otherwise None (the default stream)."""
    dev = getattr(like, "device", None)
    if dev is None or getattr(dev, "type", None) != "cuda":
        return None
    import torch

    from ...frontend.module import create_handle, set_stream

    h = _HANDLES.get(dev)
    if h is None:
        h = _HANDLES[dev] = create_handle()
    set_stream(h, torch.cuda.current_stream(dev).cuda_stream)
    return h
