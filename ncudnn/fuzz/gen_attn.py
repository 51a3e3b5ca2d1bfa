"""Scaled dot-product attention graphs (pygraph ``sdpa`` / ``sdpa_backward``) in what the attention
engines take (attention_flash_fwd / _bwd check_support): Q / K / V / O in FP32 / FP16 / BF16, BHSD or
BSHD strides or an interleaved-QKV stride pattern, GQA / MQA (H a multiple of H_kv), head dims
multiples of 8 (D_v sometimes differs; in the simulator 8 or 16, and 64 for one FP16 / BF16 case in
eight), the scale as a number, a pass-by-value tensor, a one-element device tensor or absent, and the
options: causal (top-left / bottom-right), a sliding window, the diagonal band's bounds, an additive
bias broadcast over any axis of extent 1 (its gradient too in the backward, where the bias spans the
keys), ALiBi, padding masks (INT32 sequence lengths in [1, S]) and dropout (Philox seed / offset
pass-by-value; the oracle draws the same mask).

Forward: O, and Stats (FP32, [B, H, S_q, 1]) when training. Backward: dQ / dK / dV (and dBias) from
O, dO and Stats drawn at random (Stats in [0.5, 2): the backward rebuilds P = exp(S - Stats), which
needs no consistency with the forward to be one well-defined function of its inputs).

``tol_scale``: the forward's softmax between two products is held to twice the I/O type's tolerance,
the backward (five products, the row sums of dO * O) to five times it, as the attention engine tests
hold them.
"""
import numpy as np

import ncudnn as cudnn
from ..testing import SIM
from .spec import DT, Spec, graph, pick

DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
SEQ = (1, 3, 5, 8, 9) if SIM else (1, 7, 16, 33, 64, 100, 128)
HEAD = (8, 16) if SIM else (8, 16, 32, 64, 128)


def _strides(layout, b, h, s, d):
    """Element strides [b, h, s, d] of a BHSD, BSHD or interleaved (B, S, 3, H, D) tensor."""
    if layout == "bhsd":
        return [h * s * d, s * d, d, 1]
    if layout == "bshd":
        return [s * h * d, d, h * d, 1]
    return [s * 3 * h * d, d, 3 * h * d, 1]      # one of Q / K / V in an interleaved buffer


def _wide(rng):
    """One case in eight gets head dims 64 in the simulator (the wgmma forward takes 64 / 128 only), decided from
    the generator's state without a draw, so that every other case keeps the draws it had."""
    return int(rng.bit_generator.state["state"]["state"]) % 8 == 3


def generate(rng):
    dtype, dname = pick(rng, DTYPES, p=(0.3, 0.4, 0.3))
    backward = rng.random() < 0.4
    b, hk = pick(rng, (1, 2)), pick(rng, (1, 2))
    h = hk * pick(rng, (1, 1, 2))
    sq, sk = pick(rng, SEQ), pick(rng, SEQ)
    d = pick(rng, HEAD)
    dv = d if rng.random() < 0.7 else pick(rng, HEAD)
    if SIM and dname != "float" and _wide(rng):
        d = dv = 64
    layout = pick(rng, ("bhsd", "bshd", "interleaved"))
    if layout == "interleaved" and (hk != h or dv != d or sk != sq):
        layout = "bshd"
    g = graph(dtype)
    q = g.tensor(name="q", dim=[b, h, sq, d], stride=_strides(layout, b, h, sq, d))
    k = g.tensor(name="k", dim=[b, hk, sk, d], stride=_strides(layout, b, hk, sk, d))
    v = g.tensor(name="v", dim=[b, hk, sk, dv], stride=_strides(layout, b, hk, sk, dv))
    kw, scalars, ranges, desc = {}, {}, {}, []
    scale = float(pick(rng, (0.125, 0.3, 1.0 / np.sqrt(d))))
    mode = pick(rng, ("value", "value", "by_value_tensor", "device_tensor", "none"))
    if mode == "value":
        kw["attn_scale"] = scale
    elif mode == "by_value_tensor":
        kw["attn_scale"] = g.tensor(name="scale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                                    data_type=DT.FLOAT)
        scalars["scale"] = scale
    elif mode == "device_tensor":
        kw["attn_scale"] = g.tensor(name="scale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=DT.FLOAT)
        ranges["scale"] = (scale, scale)
    desc.append("no scale" if mode == "none" else f"scale {scale:.3g} ({mode})")
    mask = pick(rng, ("none", "none", "causal", "causal_br", "window", "band"))
    if mask == "causal":
        kw["use_causal_mask"] = True
    elif mask == "causal_br":
        kw["use_causal_mask_bottom_right"] = True
    elif mask == "window":
        kw.update(use_causal_mask=True, sliding_window_length=int(pick(rng, (1, 2, 4))))
    elif mask == "band":
        kw.update(diagonal_band_left_bound=int(pick(rng, (1, 3))), diagonal_band_right_bound=int(pick(rng, (0, 2))),
                  diagonal_alignment=pick(rng, (cudnn.diagonal_alignment.TOP_LEFT,
                                                cudnn.diagonal_alignment.BOTTOM_RIGHT)))
    if mask != "none":
        desc.append(mask + "".join(f" {k_}={getattr(v_, 'name', v_)}" for k_, v_ in kw.items()
                                   if k_ != "attn_scale" and not isinstance(v_, bool)))
    bias = None
    if rng.random() < 0.3:
        # the backward's dBias needs the bias to span the keys (a bias broadcast over them has no gradient kernel)
        bd = [pick(rng, (1, b)), pick(rng, (1, h)), pick(rng, (1, sq)), sk if backward else pick(rng, (1, sk))]
        bias = g.tensor(name="bias", dim=bd, stride=[int(np.prod(bd[i + 1:])) for i in range(4)])
        kw["bias"] = bias
        desc.append(f"bias {bd}")
    if rng.random() < 0.15:
        kw["use_alibi_mask"] = True
        desc.append("alibi")
    if rng.random() < 0.2:
        kw.update(use_padding_mask=True,
                  seq_len_q=g.tensor(name="seq_q", dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=DT.INT32),
                  seq_len_kv=g.tensor(name="seq_kv", dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=DT.INT32))
        ranges.update(seq_q=(1, sq), seq_kv=(1, sk))
        desc.append("padding mask")
    if rng.random() < 0.2:
        p = float(pick(rng, (0.1, 0.3)))
        seed, offset = (g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                                 data_type=DT.INT64) for n in ("seed", "offset"))
        kw["dropout"] = (p, seed, offset)
        scalars.update(seed=int(rng.integers(0, 1 << 40)), offset=int(rng.integers(0, 1 << 20)))
        desc.append(f"dropout {p}")
    ol = "bshd" if layout == "interleaved" else layout
    o_st = _strides(ol, b, h, sq, dv)
    head = f"sdpa{'_backward' if backward else ''} {dname} b{b} h{h} hk{hk} sq{sq} sk{sk} d{d} dv{dv} {layout}"
    if not backward:
        training = rng.random() < 0.5
        o, stats = g.sdpa(q, k, v, generate_stats=training, name="attn", **kw)
        o.set_output(True).set_name("O").set_dim([b, h, sq, dv]).set_stride(o_st)
        if training:
            stats.set_output(True).set_name("Stats").set_data_type(DT.FLOAT)
        return Spec(g, f"{head} {'training' if training else 'inference'}: " + ", ".join(desc), ranges=ranges,
                    scalars=scalars, tol_scale=2.0)
    o = g.tensor(name="o", dim=[b, h, sq, dv], stride=o_st)
    do = g.tensor(name="dO", dim=[b, h, sq, dv], stride=o_st)
    stats = g.tensor(name="stats", dim=[b, h, sq, 1], stride=[h * sq, sq, 1, 1], data_type=DT.FLOAT)
    ranges["stats"] = (0.5, 2.0)
    if bias is not None and rng.random() < 0.6:
        bd = bias.get_dim()
        kw["dBias"] = g.tensor(name="dBias", dim=bd, stride=bias.get_stride())
        desc.append("dBias")
    dq, dk, dv_ = g.sdpa_backward(q, k, v, o, do, stats, name="attn_bwd",
                                  use_deterministic_algorithm=bool(rng.random() < 0.5), **kw)
    for t, name, dims, st in ((dq, "dQ", [b, h, sq, d], q.get_stride()), (dk, "dK", [b, hk, sk, d], k.get_stride()),
                              (dv_, "dV", [b, hk, sk, dv], v.get_stride())):
        t.set_output(True).set_name(name).set_dim(dims).set_stride(st)
    return Spec(g, f"{head}: " + ", ".join(desc), ranges=ranges, scalars=scalars, tol_scale=5.0)
