"""`ncudnn demo`: an mnistCUDNN-style program written only against the legacy cuDNN API.

A LeNet-like network with deterministic synthetic weights classifies a few synthetic "digit" images:

    conv1 -> +bias -> maxpool -> conv2 -> +bias -> maxpool -> fc1 (a convolution covering the whole
    map) -> +bias -> relu -> fc2 (1x1 convolution) -> +bias -> softmax

Every layer is a legacy call (cudnnConvolutionForward with the algorithm cudnnGetConvolution
ForwardAlgorithm_v7 ranks first, cudnnAddTensor, cudnnPoolingForward, cudnnActivationForward,
cudnnSoftmaxForward). Each layer's output is checked against ncudnn.reference on the layer's own
(device-computed) input, and the final classes against the reference network's. It prints the
classification, per-layer timings and PASS / FAIL. On a machine without a GPU the same code runs in
the CUDA simulator at a reduced size. A layer whose engine is not registered yet ends the demo with
the NOT_SUPPORTED message naming it (exit status 2), never a traceback.

:func:`train` (``ncudnn demo --train``; ``python -m ncudnn.demo --train``; scikit-learn from
``pip install 'ncudnn[demo]'``) trains a small LeNet on scikit-learn's 8x8 handwritten digits with the legacy
forward and backward calls and SGD by cudnnAddTensor, printing per-epoch loss, test accuracy and time (PASS
at 95% on the GPU). On the simulator it runs a few steps on a handful of images: it reports the loss going
down (PASS when it does) and no accuracy, which would mean nothing at that size.
"""
import time

import numpy as np

#: (image side, conv1 (K, R), conv2 (K, R), fc1 width) for the GPU and for the simulator
SIZES = {"gpu": (28, (20, 5), (50, 5), 500), "sim": (12, (4, 3), (6, 3), 16)}
CLASSES = 10
BATCH = 3
TOL = 3e-3  # float32 storage, TF32 allowed by the default math type


class DemoError(Exception):
    """A legacy call failed: the status name and cuDNN's last-error message."""


def _check(ret, what):
    """The out-parameters of a C-style result, or DemoError with the status and last-error message."""
    import ncudnn

    status = ret[0]
    if int(status) != 0:
        msg = ncudnn.cudnnGetLastErrorString() or ncudnn.cudnnGetErrorString(status)
        raise DemoError(f"{what}: {msg}")
    outs = ret[1:]
    return None if not outs else (outs[0] if len(outs) == 1 else outs)


def digits(side, n=BATCH):
    """Deterministic synthetic handwritten-like strokes: a vertical bar, a ring, a diagonal."""
    imgs = np.zeros((n, 1, side, side), np.float32)
    yy, xx = np.mgrid[0:side, 0:side] / (side - 1)
    shapes = [np.exp(-((xx - 0.5) / 0.08) ** 2),
              np.exp(-((np.hypot(xx - 0.5, yy - 0.5) - 0.3) / 0.07) ** 2),
              np.exp(-((xx - yy) / 0.1) ** 2)]
    for i in range(n):
        imgs[i, 0] = shapes[i % len(shapes)]
    return imgs


def weights(size, seed=2014):
    """He-initialized weights and small biases from a fixed seed: the same on every run."""
    side, (k1, r1), (k2, r2), f1 = size
    rng = np.random.default_rng(seed)
    s1 = side - r1 + 1
    p1 = s1 // 2
    s2 = p1 - r2 + 1
    p2 = s2 // 2
    shapes = {"conv1": (k1, 1, r1, r1), "conv2": (k2, k1, r2, r2), "fc1": (f1, k2, p2, p2),
              "fc2": (CLASSES, f1, 1, 1)}
    w = {}
    for name, shp in shapes.items():
        fan_in = int(np.prod(shp[1:]))
        w[name] = (rng.standard_normal(shp) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        w[name + ".b"] = (0.1 * rng.standard_normal((1, shp[0], 1, 1))).astype(np.float32)
    return w


class Net:
    """The network's descriptors and device buffers, built with the legacy API."""

    def __init__(self, handle, size, batch=BATCH):
        import ncudnn.legacy as L
        from numba import cuda

        self.L, self.cuda, self.h = L, cuda, handle
        self.size, self.batch = size, batch
        self.w = weights(size)
        self.dev = {k: cuda.to_device(v) for k, v in self.w.items()}
        self.timings = []
        self.checks = []

    def tensor(self, shape):
        L = self.L
        d = _check(L.cudnnCreateTensorDescriptor(), "cudnnCreateTensorDescriptor")
        _check(L.cudnnSetTensor4dDescriptor(d, 0, 0, *shape), "cudnnSetTensor4dDescriptor")
        return d

    def _timed(self, name, fn):
        t0 = time.perf_counter()
        fn()
        self.cuda.synchronize()
        self.timings.append((name, (time.perf_counter() - t0) * 1e3))

    def conv(self, name, x, xshape):
        from . import reference as R

        L = self.L
        wshape = self.w[name].shape
        fd = _check(L.cudnnCreateFilterDescriptor(), "cudnnCreateFilterDescriptor")
        _check(L.cudnnSetFilter4dDescriptor(fd, 0, 0, *wshape), "cudnnSetFilter4dDescriptor")
        cd = _check(L.cudnnCreateConvolutionDescriptor(), "cudnnCreateConvolutionDescriptor")
        _check(L.cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, 1, 0), "cudnnSetConvolution2dDescriptor")
        yshape = tuple(_check(L.cudnnGetConvolution2dForwardOutputDim(cd, self.tensor(xshape), fd),
                              "cudnnGetConvolution2dForwardOutputDim"))
        xd, yd = self.tensor(xshape), self.tensor(yshape)
        count, perf = _check(L.cudnnGetConvolutionForwardAlgorithm_v7(self.h, xd, fd, cd, yd, 8),
                             f"{name}: cudnnGetConvolutionForwardAlgorithm_v7")
        ok = [p for p in perf[:count] if int(p.status) == 0]
        if not ok:
            _check(L.cudnnGetConvolutionForwardWorkspaceSize(self.h, xd, fd, cd, yd, 1),
                   f"{name}: cudnnGetConvolutionForwardWorkspaceSize")
            raise DemoError(f"{name}: no convolution algorithm is supported")
        algo = ok[0].algo
        ws_size = _check(L.cudnnGetConvolutionForwardWorkspaceSize(self.h, xd, fd, cd, yd, algo),
                         f"{name}: cudnnGetConvolutionForwardWorkspaceSize")
        ws = self.cuda.device_array(max(ws_size, 1), np.uint8) if ws_size else None
        y = self.cuda.device_array(yshape, np.float32)
        self._timed(f"{name} ({algo.name.replace('CUDNN_CONVOLUTION_FWD_ALGO_', '')})", lambda: _check(
            L.cudnnConvolutionForward(self.h, 1.0, xd, x, fd, self.dev[name], cd, algo, ws, ws_size, 0.0, yd, y),
            f"{name}: cudnnConvolutionForward"))
        ref = R.conv_fprop(x.copy_to_host(), self.w[name])
        self._verify(name, y, ref)
        bd = self.tensor(self.w[name + ".b"].shape)
        before = y.copy_to_host()
        self._timed(f"{name} bias", lambda: _check(L.cudnnAddTensor(self.h, 1.0, bd, self.dev[name + ".b"], 1.0, yd, y),
                                                   f"{name}: cudnnAddTensor"))
        self._verify(name + " bias", y, R.add_tensor(self.w[name + ".b"], before))
        return y, yshape

    def pool(self, name, x, xshape):
        from . import reference as R

        L = self.L
        pd = _check(L.cudnnCreatePoolingDescriptor(), "cudnnCreatePoolingDescriptor")
        _check(L.cudnnSetPooling2dDescriptor(pd, 0, 0, 2, 2, 0, 0, 2, 2), "cudnnSetPooling2dDescriptor")
        yshape = tuple(_check(L.cudnnGetPooling2dForwardOutputDim(pd, self.tensor(xshape)),
                              "cudnnGetPooling2dForwardOutputDim"))
        y = self.cuda.device_array(yshape, np.float32)
        self._timed(name, lambda: _check(L.cudnnPoolingForward(self.h, pd, 1.0, self.tensor(xshape), x, 0.0,
                                                               self.tensor(yshape), y), f"{name}: cudnnPoolingForward"))
        ref = R.resample_forward(x.copy_to_host(), "MAXPOOL", (2, 2), (2, 2), (0, 0), (0, 0))[0]
        self._verify(name, y, ref)
        return y, yshape

    def relu(self, name, x, xshape):
        from . import reference as R

        L = self.L
        ad = _check(L.cudnnCreateActivationDescriptor(), "cudnnCreateActivationDescriptor")
        _check(L.cudnnSetActivationDescriptor(ad, 1, 0, 0.0), "cudnnSetActivationDescriptor")
        before = x.copy_to_host()
        d = self.tensor(xshape)
        self._timed(name, lambda: _check(L.cudnnActivationForward(self.h, ad, 1.0, d, x, 0.0, d, x),
                                         f"{name}: cudnnActivationForward"))
        self._verify(name, x, R.activation_forward("RELU", before))
        return x, xshape

    def softmax(self, name, x, xshape):
        from . import reference as R

        L = self.L
        y = self.cuda.device_array(xshape, np.float32)
        d = self.tensor(xshape)
        self._timed(name, lambda: _check(L.cudnnSoftmaxForward(self.h, 1, 1, 1.0, d, x, 0.0, d, y),
                                         f"{name}: cudnnSoftmaxForward"))
        self._verify(name, y, R.softmax(x.copy_to_host(), axis=1))
        return y, xshape

    def _verify(self, name, y, ref):
        from .testing import rel_err

        self.checks.append((name, rel_err(y.copy_to_host(), ref)))

    def forward(self, images):
        x, shape = self.cuda.to_device(images), images.shape
        x, shape = self.conv("conv1", x, shape)
        x, shape = self.pool("pool1", x, shape)
        x, shape = self.conv("conv2", x, shape)
        x, shape = self.pool("pool2", x, shape)
        x, shape = self.conv("fc1", x, shape)
        x, shape = self.relu("relu", x, shape)
        x, shape = self.conv("fc2", x, shape)
        x, shape = self.softmax("softmax", x, shape)
        return x.copy_to_host().reshape(self.batch, CLASSES)


def reference_forward(w, images):
    """The whole network in the float64 oracle."""
    from . import reference as R

    x = images
    for conv, pool in (("conv1", True), ("conv2", True), ("fc1", False), ("fc2", False)):
        x = R.conv_fprop(x, w[conv]) + w[conv + ".b"]
        if pool:
            x = R.resample_forward(x, "MAXPOOL", (2, 2), (2, 2), (0, 0), (0, 0))[0]
        if conv == "fc1":
            x = R.activation_forward("RELU", x)
    return R.softmax(x, axis=1).reshape(len(images), CLASSES)


def run(small=None, out=print):
    """Run the demo; returns the exit status (0 PASS, 1 FAIL, 2 an engine or device is missing)."""
    import ncudnn

    sim = ncudnn.SIMULATOR if small is None else small
    size = SIZES["sim" if sim else "gpu"]
    out(f"ncudnn {ncudnn.__version__} demo: mnistCUDNN-style LeNet through the legacy cuDNN API")
    status, h = ncudnn.cudnnCreate()
    if int(status) != 0:
        out(f"cudnnCreate failed: {ncudnn.cudnnGetErrorString(status)}: {ncudnn.cudnnGetLastErrorString()}")
        return 2
    try:
        if ncudnn.SIMULATOR:
            out(f"device: CUDA simulator (no GPU): reduced size, {size[0]}x{size[0]} images")
        else:
            out(f"device: {h.device_name} (sm_{h.compute_capability[0]}{h.compute_capability[1]}), "
                f"{size[0]}x{size[0]} images")
        images = digits(size[0])
        net = Net(h, size)
        t0 = time.perf_counter()
        try:
            probs = net.forward(images)
        except DemoError as e:
            out(f"FAIL: {e}")
            missing = "no engine runs" in str(e) or "NOT_SUPPORTED" in str(e)
            if missing:
                out("A layer's engine is not registered yet; the demo runs once the engine layer has it "
                    "(`ncudnn info` lists the registered engines).")
            return 2 if missing else 1
        except Exception as e:  # a kernel or driver failure: say what, no traceback
            out(f"FAIL: unexpected {type(e).__name__}: {e}")
            return 1
        total = (time.perf_counter() - t0) * 1e3
        ref = reference_forward(net.w, images)
        out("layer timings (ms, first call includes compilation):")
        for name, ms in net.timings:
            out(f"  {name:<28s} {ms:10.3f}")
        out(f"  {'total':<28s} {total:10.3f}")
        bad = [(n, e) for n, e in net.checks if not e <= TOL]
        for n, e in net.checks:
            out(f"  check {n:<22s} rel_err {e:.2e} {'ok' if e <= TOL else 'MISMATCH'}")
        for i, (p, r) in enumerate(zip(probs, ref)):
            out(f"image {i}: class {int(np.argmax(p))} (p = {p.max():.4f}); reference class {int(np.argmax(r))}")
        end_err = float(np.abs(probs - ref).max())
        same = bool(np.all(np.argmax(probs, 1) == np.argmax(ref, 1)))
        ok = not bad and same and end_err <= 1e-3
        out(f"end-to-end: max |p - p_ref| = {end_err:.2e}; classes {'match' if same else 'DIFFER'}")
        out("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        ncudnn.cudnnDestroy(h)


# ------------------------------------------------------------------------------------ training

#: (train images, test images, epochs, batch, conv channels) for the GPU and the simulator
TRAIN_SIZES = {"gpu": (None, None, 15, 32, 8), "sim": (4, 4, 2, 4, 2)}
TARGET_ACCURACY = 0.95


def load_digits(seed=0):
    """8x8 handwritten digits (scikit-learn's copy of the UCI set) as float32 [N, 1, 8, 8] in [0, 1] and
    labels, shuffled; (None, None) when scikit-learn is not installed."""
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        return None, None
    d = sk_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    return (d.images[order] / 16.0).astype(np.float32)[:, None], d.target[order].astype(np.int64)


class Trainer:
    """A small LeNet trained with the legacy API only:
    conv 3x3 (1 -> C, pad 1) + bias -> relu -> maxpool 2x2 -> fc (a convolution over the whole map) + bias
    -> softmax; cross-entropy gradient (p - onehot) / B by cudnnOpTensor; backward by cudnnConvolutionBackward
    Filter / Data / Bias, cudnnPoolingBackward, cudnnActivationBackward; SGD by cudnnAddTensor."""

    def __init__(self, handle, side=8, channels=8, batch=32, lr=0.2, seed=0):
        import ncudnn.legacy as L
        from numba import cuda

        self.L, self.cuda, self.h, self.B, self.lr = L, cuda, handle, batch, lr
        rng = np.random.default_rng(seed)
        half = side // 2
        c1, p, lg = (batch, channels, side, side), (batch, channels, half, half), (batch, CLASSES, 1, 1)
        self.shapes = {"x": (batch, 1, side, side), "c1": c1, "p": p, "logits": lg, "w1": (channels, 1, 3, 3),
                       "b1": (1, channels, 1, 1), "w2": (CLASSES, channels, half, half), "b2": (1, CLASSES, 1, 1)}
        self.params = {"w1": rng.standard_normal(self.shapes["w1"]) * np.sqrt(2 / 9),
                       "w2": rng.standard_normal(self.shapes["w2"]) * np.sqrt(2 / (channels * half * half)),
                       "b1": np.zeros(self.shapes["b1"]), "b2": np.zeros(self.shapes["b2"])}
        self.dev = {k: cuda.to_device(v.astype(np.float32)) for k, v in self.params.items()}
        buffers = {"c1": c1, "a1": c1, "da1": c1, "dc1": c1, "p": p, "dp": p, "logits": lg, "prob": lg, "dl": lg,
                   "onehot": lg}
        for k, shape in buffers.items():
            self.dev[k] = cuda.device_array(shape, np.float32)
        for k in ("w1", "w2", "b1", "b2"):
            self.dev["d" + k] = cuda.device_array(self.shapes[k], np.float32)
        self.d = {k: self._tensor(self.shapes[k]) for k in ("x", "c1", "p", "logits", "b1", "b2")}
        self.f = {k: self._filter(self.shapes[k]) for k in ("w1", "w2")}
        self.conv1, self.fc = self._conv(1), self._conv(0)
        self.pool = _check(L.cudnnCreatePoolingDescriptor(), "cudnnCreatePoolingDescriptor")
        _check(L.cudnnSetPooling2dDescriptor(self.pool, 0, 0, 2, 2, 0, 0, 2, 2), "cudnnSetPooling2dDescriptor")
        self.relu = _check(L.cudnnCreateActivationDescriptor(), "cudnnCreateActivationDescriptor")
        _check(L.cudnnSetActivationDescriptor(self.relu, 1, 0, 0.0), "cudnnSetActivationDescriptor")
        self.sub = _check(L.cudnnCreateOpTensorDescriptor(), "cudnnCreateOpTensorDescriptor")
        _check(L.cudnnSetOpTensorDescriptor(self.sub, 0, 0, 0), "cudnnSetOpTensorDescriptor")
        self.algos, need = {}, 0
        for layer, conv, x, w, y in (("1", self.conv1, "x", "w1", "c1"), ("2", self.fc, "p", "w2", "logits")):
            for kind, get, size, args in (
                    ("fwd", L.cudnnGetConvolutionForwardAlgorithm_v7, L.cudnnGetConvolutionForwardWorkspaceSize,
                     (self.d[x], self.f[w], conv, self.d[y])),
                    ("dgrad", L.cudnnGetConvolutionBackwardDataAlgorithm_v7,
                     L.cudnnGetConvolutionBackwardDataWorkspaceSize, (self.f[w], self.d[y], conv, self.d[x])),
                    ("wgrad", L.cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                     L.cudnnGetConvolutionBackwardFilterWorkspaceSize, (self.d[x], self.d[y], conv, self.f[w]))):
                if layer == "1" and kind == "dgrad":
                    continue  # the input needs no gradient
                n, perf = _check(get(self.h, *args, 8), f"conv{layer} {kind}: algorithm query")
                ok = [p.algo for p in perf[:n] if int(p.status) == 0]
                algo = ok[0] if ok else perf[0].algo
                need = max(need, _check(size(self.h, *args, algo), f"conv{layer} {kind}: workspace size"))
                self.algos[kind + layer] = algo
        self.ws_size = need
        self.ws = cuda.device_array(max(need, 1), np.uint8) if need else None

    def _tensor(self, shape):
        d = _check(self.L.cudnnCreateTensorDescriptor(), "cudnnCreateTensorDescriptor")
        _check(self.L.cudnnSetTensor4dDescriptor(d, 0, 0, *shape), "cudnnSetTensor4dDescriptor")
        return d

    def _filter(self, shape):
        f = _check(self.L.cudnnCreateFilterDescriptor(), "cudnnCreateFilterDescriptor")
        _check(self.L.cudnnSetFilter4dDescriptor(f, 0, 0, *shape), "cudnnSetFilter4dDescriptor")
        return f

    def _conv(self, pad):
        c = _check(self.L.cudnnCreateConvolutionDescriptor(), "cudnnCreateConvolutionDescriptor")
        _check(self.L.cudnnSetConvolution2dDescriptor(c, pad, pad, 1, 1, 1, 1, 1, 0), "cudnnSetConvolution2dDescriptor")
        return c

    def forward(self, x):
        L, h, d, f, g = self.L, self.h, self.d, self.f, self.dev
        _check(L.cudnnConvolutionForward(h, 1.0, d["x"], x, f["w1"], g["w1"], self.conv1, self.algos["fwd1"], self.ws,
                                         self.ws_size, 0.0, d["c1"], g["c1"]), "conv1: cudnnConvolutionForward")
        _check(L.cudnnAddTensor(h, 1.0, d["b1"], g["b1"], 1.0, d["c1"], g["c1"]), "conv1: cudnnAddTensor")
        _check(L.cudnnActivationForward(h, self.relu, 1.0, d["c1"], g["c1"], 0.0, d["c1"], g["a1"]),
               "relu: cudnnActivationForward")
        _check(L.cudnnPoolingForward(h, self.pool, 1.0, d["c1"], g["a1"], 0.0, d["p"], g["p"]),
               "pool: cudnnPoolingForward")
        _check(L.cudnnConvolutionForward(h, 1.0, d["p"], g["p"], f["w2"], g["w2"], self.fc, self.algos["fwd2"], self.ws,
                                         self.ws_size, 0.0, d["logits"], g["logits"]), "fc: cudnnConvolutionForward")
        _check(L.cudnnAddTensor(h, 1.0, d["b2"], g["b2"], 1.0, d["logits"], g["logits"]), "fc: cudnnAddTensor")
        _check(L.cudnnSoftmaxForward(h, 1, 1, 1.0, d["logits"], g["logits"], 0.0, d["logits"], g["prob"]),
               "cudnnSoftmaxForward")
        return g["prob"].copy_to_host().reshape(self.B, CLASSES)

    def step(self, x, labels):
        """One SGD step on a batch; returns the batch's mean cross-entropy."""
        L, h, d, f, g, B = self.L, self.h, self.d, self.f, self.dev, self.B
        xd = self.cuda.to_device(x)
        p = self.forward(xd)
        onehot = np.zeros((B, CLASSES, 1, 1), np.float32)
        onehot[np.arange(B), labels] = 1.0
        g["onehot"].copy_to_device(onehot)
        _check(L.cudnnOpTensor(h, self.sub, 1.0 / B, d["logits"], g["prob"], -1.0 / B, d["logits"], g["onehot"], 0.0,
                               d["logits"], g["dl"]), "cudnnOpTensor")
        ws, n = self.ws, self.ws_size
        _check(L.cudnnConvolutionBackwardFilter(h, 1.0, d["p"], g["p"], d["logits"], g["dl"], self.fc,
                                                self.algos["wgrad2"], ws, n, 0.0, f["w2"], g["dw2"]),
               "fc: cudnnConvolutionBackwardFilter")
        _check(L.cudnnConvolutionBackwardBias(h, 1.0, d["logits"], g["dl"], 0.0, d["b2"], g["db2"]),
               "fc: cudnnConvolutionBackwardBias")
        _check(L.cudnnConvolutionBackwardData(h, 1.0, f["w2"], g["w2"], d["logits"], g["dl"], self.fc,
                                              self.algos["dgrad2"], ws, n, 0.0, d["p"], g["dp"]),
               "fc: cudnnConvolutionBackwardData")
        _check(L.cudnnPoolingBackward(h, self.pool, 1.0, d["p"], g["p"], d["p"], g["dp"], d["c1"], g["a1"], 0.0,
                                      d["c1"], g["da1"]), "pool: cudnnPoolingBackward")
        _check(L.cudnnActivationBackward(h, self.relu, 1.0, d["c1"], g["a1"], d["c1"], g["da1"], d["c1"], g["c1"], 0.0,
                                         d["c1"], g["dc1"]), "relu: cudnnActivationBackward")
        _check(L.cudnnConvolutionBackwardFilter(h, 1.0, d["x"], xd, d["c1"], g["dc1"], self.conv1,
                                                self.algos["wgrad1"], ws, n, 0.0, f["w1"], g["dw1"]),
               "conv1: cudnnConvolutionBackwardFilter")
        _check(L.cudnnConvolutionBackwardBias(h, 1.0, d["c1"], g["dc1"], 0.0, d["b1"], g["db1"]),
               "conv1: cudnnConvolutionBackwardBias")
        for k, desc in (("w1", None), ("w2", None), ("b1", d["b1"]), ("b2", d["b2"])):
            desc = desc or self._flat(k)
            _check(L.cudnnAddTensor(h, -self.lr, desc, g["d" + k], 1.0, desc, g[k]), f"SGD {k}: cudnnAddTensor")
        return float(-np.mean(np.log(np.maximum(p[np.arange(B), labels], 1e-30))))

    def _flat(self, k):
        key = "flat_" + k
        if key not in self.d:
            self.d[key] = self._tensor(self.shapes[k])
        return self.d[key]

    def accuracy(self, images, labels):
        hits = 0
        for i in range(0, len(images) - self.B + 1, self.B):
            p = self.forward(self.cuda.to_device(images[i:i + self.B]))
            hits += int(np.sum(np.argmax(p, 1) == labels[i:i + self.B]))
        return hits / max(len(images) // self.B * self.B, 1)


def train(small=None, out=print, data=None):
    """Train and evaluate the small LeNet on the 8x8 digits; exit status 0 when the test accuracy reaches
    TARGET_ACCURACY (on the simulator, at reduced size: when the epoch loss went down), 1 otherwise, 2 when an
    engine, the device or the dataset is missing."""
    import ncudnn

    sim = ncudnn.SIMULATOR if small is None else small
    n_train, n_test, epochs, batch, channels = TRAIN_SIZES["sim" if sim else "gpu"]
    images, labels = data if data is not None else load_digits()
    if images is None:
        out("FAIL: the digits dataset comes with scikit-learn, which is not installed: pip install 'ncudnn[demo]' "
            "(from a checkout: pip install -e '.[demo]')")
        return 2
    split = int(len(images) * 0.8)
    xtr, ytr = images[:split][:n_train], labels[:split][:n_train]
    xte, yte = images[split:][:n_test], labels[split:][:n_test]
    out(f"ncudnn {ncudnn.__version__} demo: training a LeNet on {len(xtr)} 8x8 digits through the legacy cuDNN API"
        + (" (CUDA simulator: reduced size)" if ncudnn.SIMULATOR else ""))
    status, h = ncudnn.cudnnCreate()
    if int(status) != 0:
        out(f"cudnnCreate failed: {ncudnn.cudnnGetLastErrorString()}")
        return 2
    try:
        t0 = time.perf_counter()
        net = Trainer(h, side=images.shape[-1], channels=channels, batch=batch)
        losses = []
        for epoch in range(epochs):
            order = np.random.default_rng(epoch).permutation(len(xtr))
            ep = [net.step(xtr[order[i:i + batch]], ytr[order[i:i + batch]])
                  for i in range(0, len(xtr) - batch + 1, batch)]
            losses.append(float(np.mean(ep)))
            out(f"epoch {epoch + 1}: loss {np.mean(ep):.4f} ({time.perf_counter() - t0:.1f} s)")
        if sim:  # a few steps on a handful of images: an accuracy would mean nothing, the loss can drop
            ok = losses[-1] < losses[0] * (1 - 1e-4)  # down by more than the rounding of a sum in another order
            out(f"test accuracy: not measured at this size ({len(xtr)} training images, {epochs} epochs; the full run "
                f"on a GPU checks >= {TARGET_ACCURACY:.0%}); what the simulator shows: every forward and backward "
                f"call ran and the training loss went {losses[0]:.4f} -> {losses[-1]:.4f} "
                f"({'down' if ok else 'not down'}); {time.perf_counter() - t0:.1f} s")
        else:
            acc = net.accuracy(xte, yte)
            ok = acc >= TARGET_ACCURACY
            out(f"test accuracy {acc * 100:.2f}% on {len(xte) // batch * batch} images (PASS at "
                f"{TARGET_ACCURACY:.0%}); {time.perf_counter() - t0:.1f} s")
        out("PASS" if ok else "FAIL")
        return 0 if ok else 1
    except DemoError as e:
        out(f"FAIL: {e}")
        return 2 if "no engine runs" in str(e) or "NOT_SUPPORTED" in str(e) else 1
    except Exception as e:
        out(f"FAIL: unexpected {type(e).__name__}: {e}")
        return 1
    finally:
        ncudnn.cudnnDestroy(h)


if __name__ == "__main__":
    import sys

    sys.exit(train() if "--train" in sys.argv[1:] else run())
