"""Reference for cudnnRNNForward / cudnnRNNBackwardData_v8 + BackwardWeights_v8 (LINEAR_INPUT,
no projection, no inter-layer dropout), float64.

Layout: x (T, N, I) sequence-major (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED); y (T, N, D*Hp) with
the forward direction in [..., :Hp] and the reverse in [..., Hp:]; hx / hy (L*D, N, Hp), cx / cy
(L*D, N, H), row l*D + d for layer l, direction d; Hp = H unless an LSTM projection is given.
``weights[l][d]`` is a dict of W (G, H, I_l), R (G, H, Hp), bW (G, H), bR (G, H) and, for an LSTM
with recurrent projection (projSize < hiddenSize), P (Hp, H) (linLayerID 8)   (I_0 = I,
I_l = D*Hp above; missing biases of the other bias modes are zeros). Gates g in cuDNN's linLayerID
order (W is g, R is G + g):

* RNN_RELU / RNN_TANH (G = 1): h_t = act(W x_t + bW + R h_{t-1} + bR)
* LSTM (G = 4: input i, forget f, new memory c~, output o):
      i, f, o = sigmoid(W_* x_t + bW_* + R_* h_{t-1} + bR_*),  c~ = tanh(W_c x_t + bW_c + R_c h + bR_c)
      c_t = f * c_{t-1} + i * c~,  h_t = o * tanh(c_t)   (h_t = P (o * tanh(c_t)) with projection)
      cell_clip (lclip, rclip) [CUDNN_RNN_CLIP_MINMAX]: c_t is clamped to [lclip, rclip] before the
      tanh and before it is carried (ncudnn's reading of "LSTM cell clipping")
* GRU (G = 3: reset r, update z, new memory h~):
      r, z = sigmoid(W_* x_t + bW_* + R_* h_{t-1} + bR_*)
      h~ = tanh(W_h x_t + bW_h + r * (R_h h_{t-1} + bR_h)),  h_t = (1 - z) * h~ + z * h_{t-1}

seq_lengths (N,) [optional]: entry n has T_n valid steps; the reverse direction runs from step
T_n - 1 down to 0; outputs at t >= T_n are 0 and hy / cy are the states after the last valid step.
Backward returns the exact gradients of  <y, dy> + <hy, dhy> + <cy, dcy>.
"""
import numpy as np

from ..types import cudnnRNNMode_t as RM
from ._util import enum_member, f64

__all__ = ["rnn_forward", "rnn_backward", "rnn_gate_count"]


def rnn_gate_count(mode):
    """G for the mode: 1 (RELU / TANH), 4 (LSTM), 3 (GRU)."""
    mode = enum_member(RM, mode, "CUDNN_")
    return {RM.CUDNN_RNN_RELU: 1, RM.CUDNN_RNN_TANH: 1, RM.CUDNN_LSTM: 4, RM.CUDNN_GRU: 3}[mode]


def _sig(a):
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def _cell(mode, w, x, h, c, clip=None):
    gx = np.einsum("ghi,ni->ngh", w["W"], x) + w["bW"]
    gh = np.einsum("ghk,nk->ngh", w["R"], h) + w["bR"]
    if mode in (RM.CUDNN_RNN_RELU, RM.CUDNN_RNN_TANH):
        a = gx[:, 0] + gh[:, 0]
        hn = np.maximum(a, 0.0) if mode == RM.CUDNN_RNN_RELU else np.tanh(a)
        return hn, c, dict(a=a, hn=hn)
    if mode == RM.CUDNN_LSTM:
        a = gx + gh
        i, f, g, o = _sig(a[:, 0]), _sig(a[:, 1]), np.tanh(a[:, 2]), _sig(a[:, 3])
        raw = f * c + i * g
        cn = raw if clip is None else np.clip(raw, clip[0], clip[1])
        tc = np.tanh(cn)
        m = o * tc
        hn = m if "P" not in w else np.einsum("kh,nh->nk", w["P"], m)
        return hn, cn, dict(i=i, f=f, g=g, o=o, tc=tc, c=c, raw=raw, m=m)
    r, z = _sig(gx[:, 0] + gh[:, 0]), _sig(gx[:, 1] + gh[:, 1])
    n = np.tanh(gx[:, 2] + r * gh[:, 2])
    return (1.0 - z) * n + z * h, c, dict(r=r, z=z, n=n, gh2=gh[:, 2], h=h)


def _cell_bwd(mode, cache, dh, dc, w, dw, clip=None):
    """-> (d gate pre-activations from x (N, G, H), from h (N, G, H), dh_prev part, dc_prev);
    accumulates the projection gradient into dw['P']."""
    if mode in (RM.CUDNN_RNN_RELU, RM.CUDNN_RNN_TANH):
        a = cache["a"]
        da = dh * ((a > 0) if mode == RM.CUDNN_RNN_RELU else (1.0 - cache["hn"] ** 2))
        return da[:, None], da[:, None], 0.0, dc
    if mode == RM.CUDNN_LSTM:
        i, f, g, o, tc = cache["i"], cache["f"], cache["g"], cache["o"], cache["tc"]
        if "P" in w:
            dw["P"] += np.einsum("nk,nh->kh", dh, cache["m"])
            dh = np.einsum("nk,kh->nh", dh, w["P"])
        dcn = dc + dh * o * (1.0 - tc * tc)
        if clip is not None:
            dcn = dcn * ((cache["raw"] > clip[0]) & (cache["raw"] < clip[1]))
        da = np.stack([dcn * g * i * (1 - i), dcn * cache["c"] * f * (1 - f),
                       dcn * i * (1 - g * g), dh * tc * o * (1 - o)], axis=1)
        return da, da, 0.0, dcn * f
    r, z, n = cache["r"], cache["z"], cache["n"]
    dan = dh * (1.0 - z) * (1.0 - n * n)
    dar = dan * cache["gh2"] * r * (1 - r)
    daz = dh * (cache["h"] - n) * z * (1 - z)
    dgx = np.stack([dar, daz, dan], axis=1)
    dgh = np.stack([dar, daz, dan * r], axis=1)
    return dgx, dgh, dh * z, dc


def _order(T, lens, reverse):
    """idx[t, n]: the source step processed at step t (reverse within each entry's length)."""
    t = np.arange(T)[:, None]
    return np.where(t < lens, (lens - 1 - t) if reverse else t, t)


def _run_dir(mode, w, x, h, c, lens, reverse, clip=None):
    T, N = x.shape[:2]
    idx = _order(T, lens, reverse)
    xs = x[idx, np.arange(N)]
    ys, caches = np.zeros((T, N, h.shape[1])), []
    for t in range(T):
        valid = (t < lens)[:, None]
        hn, cn, cache = _cell(mode, w, xs[t], h, c, clip)
        caches.append((cache, h, c))
        h, c = np.where(valid, hn, h), np.where(valid, cn, c)
        ys[t] = np.where(valid, hn, 0.0)
    y = np.zeros_like(ys)
    y[idx, np.arange(N)] = ys
    return y, h, c, (xs, idx, caches)


def _prep(mode, x, hx, cx, weights, seq_lengths):
    mode = enum_member(RM, mode, "CUDNN_")
    x = f64(x)
    T, N = x.shape[:2]
    L, D = len(weights), len(weights[0])
    H, Hp = f64(weights[0][0]["R"]).shape[1:]
    hx = np.zeros((L * D, N, Hp)) if hx is None else f64(hx)
    cx = np.zeros((L * D, N, H)) if cx is None else f64(cx)
    lens = np.full(N, T) if seq_lengths is None else np.asarray(seq_lengths).reshape(-1)
    ws = [[{k: f64(v) for k, v in wd.items()} for wd in wl] for wl in weights]
    return mode, x, hx, cx, ws, lens.astype(np.int64), L, D


def rnn_forward(mode, x, hx, cx, weights, seq_lengths=None, cell_clip=None):
    """-> (y (T, N, D*Hp), hy (L*D, N, Hp), cy (L*D, N, H); cy equals cx unless LSTM)."""
    mode, x, hx, cx, ws, lens, L, D = _prep(mode, x, hx, cx, weights, seq_lengths)
    hy, cy = hx.copy(), cx.copy()
    inp = x
    for l in range(L):
        outs = []
        for d in range(D):
            y, h, c, _ = _run_dir(mode, ws[l][d], inp, hx[l * D + d], cx[l * D + d], lens, d == 1,
                                  cell_clip)
            hy[l * D + d], cy[l * D + d] = h, c
            outs.append(y)
        inp = np.concatenate(outs, axis=-1)
    return inp, hy, cy


def rnn_backward(mode, x, hx, cx, weights, dy, dhy=None, dcy=None, seq_lengths=None,
                 cell_clip=None):
    """-> dict(dx, dhx, dcx, dweights) for the loss <y, dy> + <hy, dhy> + <cy, dcy>;
    dweights mirrors ``weights`` (W, R, bW, bR per layer and direction)."""
    mode, x, hx, cx, ws, lens, L, D = _prep(mode, x, hx, cx, weights, seq_lengths)
    T, N = x.shape[:2]
    H = hx.shape[2]
    dhy = np.zeros_like(hx) if dhy is None else f64(dhy)
    dcy = np.zeros_like(cx) if dcy is None else f64(dcy)
    inputs, runs = [x], []
    for l in range(L):
        runs.append([_run_dir(mode, ws[l][d], inputs[-1], hx[l * D + d], cx[l * D + d], lens,
                              d == 1, cell_clip) for d in range(D)])
        inputs.append(np.concatenate([r[0] for r in runs[-1]], axis=-1))
    dhx, dcx = np.zeros_like(hx), np.zeros_like(cx)
    dws = [[{k: np.zeros_like(v) for k, v in wd.items()} for wd in wl] for wl in ws]
    dout = f64(dy)
    for l in reversed(range(L)):
        din = np.zeros_like(inputs[l])
        for d in range(D):
            w, dw = ws[l][d], dws[l][d]
            xs, idx, caches = runs[l][d][3]
            dys = dout[..., d * H:(d + 1) * H][idx, np.arange(N)]
            dh, dc = dhy[l * D + d].copy(), dcy[l * D + d].copy()
            dxs = np.zeros_like(xs)
            for t in reversed(range(T)):
                valid = (t < lens)[:, None]
                cache, h_prev, c_prev = caches[t]
                g_h = np.where(valid, dh + dys[t], 0.0)
                g_c = np.where(valid, dc, 0.0)
                dgx, dgh, dh_part, dc_prev = _cell_bwd(mode, cache, g_h, g_c, w, dw, cell_clip)
                dxs[t] = np.einsum("ngh,ghi->ni", dgx, w["W"])
                dh_new = dh_part + np.einsum("ngh,ghk->nk", dgh, w["R"])
                dw["W"] += np.einsum("ngh,ni->ghi", dgx, xs[t])
                dw["R"] += np.einsum("ngh,nk->ghk", dgh, h_prev)
                dw["bW"] += dgx.sum(0)
                dw["bR"] += dgh.sum(0)
                dh = np.where(valid, dh_new, dh)
                dc = np.where(valid, dc_prev, dc)
            dhx[l * D + d], dcx[l * D + d] = dh, dc
            np.add.at(din, (idx, np.arange(N)), np.where((np.arange(T)[:, None] < lens)[..., None],
                                                          dxs, 0.0))
        dout = din
    return dict(dx=dout, dhx=dhx, dcx=dcx, dweights=dws)
